#!/usr/bin/env python3
"""Acceptance check for the structured-output corpus (issue 7).

For every item under corpus/ (JSON schemas, regexes, EBNF grammars, json_object):
- completeness: each valid document (hand-written, plus documents from gen_instances.py for
  schemas, each first confirmed valid by jsonschema) is tokenized with the real tokenizer and
  must be accepted token by token by the matcher (grammar_walk does that, in C++);
- soundness: N seeded random walks, uniform among the allowed tokens of the real tokenizer; each
  finished output must pass an independent validator: jsonschema (schemas), Python's
  re.fullmatch (regexes), ebnf_recognizer.py (EBNF). Walks that hit the token cap are counted
  separately, never as passes.
Exit status 1 on any failure.
"""

import argparse
import glob
import json
import os
import re
import subprocess
import sys
import time

FORMATS = ("date", "time", "date-time", "email", "uuid", "ipv4", "uri")
HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)

import ebnf_recognizer  # noqa: E402
import gen_instances  # noqa: E402
import jsonschema  # noqa: E402


def format_checker():
    """jsonschema's checker, with our own checks for formats whose optional backend is absent."""
    # The draft's own checker: a plain FormatChecker() mixes drafts ("time" would be draft 3's).
    base = getattr(jsonschema, "draft202012_format_checker", None) or \
        jsonschema.Draft202012Validator.FORMAT_CHECKER
    fc = jsonschema.FormatChecker(formats=())
    fc.checkers = dict(base.checkers)
    have = set(fc.checkers)
    time_re = re.compile(r"(\d{2}):(\d{2}):(\d{2})(\.\d+)?([Zz]|[+-](\d{2}):(\d{2}))\Z", re.ASCII)

    def time_ok(s):
        m = time_re.match(s)
        if not m:
            return False
        h, mi, sec = int(m.group(1)), int(m.group(2)), int(m.group(3))
        if h > 23 or mi > 59 or sec > 59:
            return False
        if m.group(6) is not None and (int(m.group(6)) > 23 or int(m.group(7)) > 59):
            return False
        return True

    def date_ok(s):
        import datetime
        if not re.fullmatch(r"\d{4}-\d{2}-\d{2}", s, re.ASCII):
            return False
        try:
            datetime.date.fromisoformat(s)
        except ValueError:
            return False
        return True

    if "time" not in have:
        fc.checks("time")(lambda s: not isinstance(s, str) or time_ok(s))
    if "date" not in have:
        fc.checks("date")(lambda s: not isinstance(s, str) or date_ok(s))
    if "date-time" not in have:
        def dt_ok(s):
            if not isinstance(s, str):
                return True
            parts = re.split("[Tt]", s, maxsplit=1)
            return len(parts) == 2 and date_ok(parts[0]) and time_ok(parts[1])
        fc.checks("date-time")(dt_ok)
    missing = [f for f in ("date", "time", "date-time", "email", "uuid", "ipv4", "uri")
               if f not in fc.checkers]
    return fc, sorted(have), missing


def reject_constant(name):
    raise ValueError("non-JSON constant " + name)


def strict_json(text):
    return json.loads(text, parse_constant=reject_constant)


def load_items(corpus):
    items = []
    for path in sorted(glob.glob(os.path.join(corpus, "*", "*.json"))):
        rel = os.path.relpath(path, corpus)
        with open(path, encoding="utf-8") as f:
            item = json.load(f)
        item["id"] = rel
        items.append(item)
    return items


def documents(item, fc, stats):
    """Exact texts that must be accepted, for grammar_walk."""
    kind = item["kind"]
    docs = list(item.get("valid_text", []))
    if kind in ("json_schema", "json_object"):
        schema = item.get("schema", {"type": "object"})
        validator = jsonschema.Draft202012Validator(schema, format_checker=fc)
        values = list(item.get("valid", []))
        if kind == "json_schema" and item.get("generate", True):
            seed = sum(ord(c) for c in item["id"])
            values += gen_instances.generate(schema, 4, seed, validator)
        for v in values:
            errors = list(validator.iter_errors(v))
            if errors:
                stats["bad_expectation"].append((item["id"], json.dumps(v)[:200],
                                                  errors[0].message[:200]))
                continue
            docs += gen_instances.serializations(v)
        for t in item.get("valid_text", []):
            errors = list(validator.iter_errors(strict_json(t)))
            if errors:
                stats["bad_expectation"].append((item["id"], t[:200], errors[0].message[:200]))
    elif kind == "regex":
        for t in item.get("valid", []):
            if not re.fullmatch(item["regex"], t, re.ASCII):
                stats["bad_expectation"].append((item["id"], t, "re.fullmatch rejects it"))
            docs.append(t)
    elif kind == "ebnf":
        rules = ebnf_recognizer.parse(item["ebnf"])
        for t in item.get("valid", []):
            if not ebnf_recognizer.recognize(rules, t):
                stats["bad_expectation"].append((item["id"], t, "recognizer rejects it"))
            docs.append(t)
    # Dedup, keep order.
    seen = set()
    return [d for d in docs if not (d in seen or seen.add(d))]


def job_of(item, docs):
    kind = item["kind"]
    source = {"json_schema": lambda: item["schema"], "json_object": lambda: None,
              "regex": lambda: item["regex"], "ebnf": lambda: item["ebnf"]}[kind]()
    job = {"id": item["id"], "kind": kind, "docs": docs}
    if source is not None:
        job["source"] = source
    return job


class Validators:
    def __init__(self, fc):
        self.fc = fc
        self.cache = {}

    def check(self, item, text_bytes):
        """None if valid, else the reason."""
        try:
            text = text_bytes.decode("utf-8")
        except UnicodeDecodeError as e:
            return "not UTF-8: %s" % e
        kind = item["kind"]
        if kind in ("json_schema", "json_object"):
            try:
                value = strict_json(text)
            except ValueError as e:
                return "not JSON: %s" % e
            key = item["id"]
            if key not in self.cache:
                schema = item.get("schema", {"type": "object"})
                self.cache[key] = jsonschema.Draft202012Validator(schema, format_checker=self.fc)
            err = next(iter(self.cache[key].iter_errors(value)), None)
            return None if err is None else "jsonschema: " + err.message[:300]
        if kind == "regex":
            # re.ASCII: \\w \\d \\s are ASCII, as in our front end (PCRE2 without UCP, ECMAScript).
            return None if re.fullmatch(item["regex"], text, re.ASCII) else "re.fullmatch rejects it"
        if key_rules(item) is None:
            return "bad grammar"
        return None if ebnf_recognizer.recognize(key_rules(item), text) else "recognizer rejects"


_rules_cache = {}


def key_rules(item):
    if item["id"] not in _rules_cache:
        _rules_cache[item["id"]] = ebnf_recognizer.parse(item["ebnf"])
    return _rules_cache[item["id"]]


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--walker", required=True)
    ap.add_argument("--tokenizer", required=True)
    ap.add_argument("--corpus", default=os.path.join(HERE, "corpus"))
    ap.add_argument("--walks", type=int, default=2)
    ap.add_argument("--max-tokens", type=int, default=128)
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--jobs", type=int, default=1, help="parallel walker processes")
    ap.add_argument("--workdir", default="corpus_run")
    ap.add_argument("--only", default="", help="substring filter on item ids")
    ap.add_argument("--ids-file", default="", help="only the item ids listed in this file")
    ap.add_argument("--report", default="", help="write a JSON summary here")
    ap.add_argument("--max-docs", type=int, default=0,
                    help="> 0: check only the first N documents of each item (CI setting)")
    ap.add_argument("--item-budget-s", type=float, default=0,
                    help="> 0: the walker stops an item's walks after this long (reported)")
    ap.add_argument("--prepare-only", action="store_true",
                    help="write jobs.jsonl and stop (run grammar_walk elsewhere)")
    ap.add_argument("--validate-only", action="store_true",
                    help="validate existing out.*.jsonl in --workdir")
    args = ap.parse_args()

    fc, have, missing = format_checker()
    import importlib.metadata
    print("validators: python %s, jsonschema %s; format checkers from jsonschema: %s; added by "
          "this script: %s" % (sys.version.split()[0], importlib.metadata.version("jsonschema"),
                               ",".join(f for f in have if f in FORMATS),
                               ",".join(f for f in ("date", "time", "date-time") if f not in have)))
    if missing:
        print("FAIL: no checker for formats " + ",".join(missing))
        return 1
    items = [it for it in load_items(args.corpus) if args.only in it["id"]]
    if args.ids_file:
        wanted = set(open(args.ids_file).read().split())
        items = [it for it in items if it["id"] in wanted]
    stats = {"bad_expectation": []}
    os.makedirs(args.workdir, exist_ok=True)
    jobs_path = os.path.join(args.workdir, "jobs.jsonl")
    by_id = {}
    n_docs = 0
    with open(jobs_path, "w", encoding="utf-8") as f:
        for it in items:
            docs = documents(it, fc, stats)
            if args.max_docs > 0:
                docs = docs[:args.max_docs]
            n_docs += len(docs)
            by_id[it["id"]] = it
            f.write(json.dumps(job_of(it, docs), ensure_ascii=False) + "\n")
    if args.prepare_only:
        print("wrote %s (%d items, %d documents)" % (jobs_path, len(items), n_docs))
        return 0
    t0 = time.time()
    procs = []
    outs = []
    if args.validate_only:
        outs = sorted(glob.glob(os.path.join(args.workdir, "out.*.jsonl")))
    for s in range(0 if args.validate_only else args.jobs):
        out = os.path.join(args.workdir, "out.%d.jsonl" % s)
        outs.append(out)
        procs.append(subprocess.Popen([args.walker, "--tokenizer", args.tokenizer, "--jobs",
                                       jobs_path, "--out", out, "--walks", str(args.walks),
                                       "--seed", str(args.seed), "--max-tokens",
                                       str(args.max_tokens), "--shard", "%d/%d" % (s, args.jobs),
                                       "--item-budget-s", str(args.item_budget_s)]))
    rcs = [p.wait() for p in procs]
    walk_seconds = time.time() - t0
    if any(rcs):
        print("FAIL: walker exit codes %s" % rcs)
        return 1

    v = Validators(fc)
    kinds = {}
    failures = []
    masks = 0
    mask_ms = 0.0
    compile_ms = []
    short_items = []
    walk_counts = {}
    for out in outs:
        with open(out, encoding="utf-8") as f:
            for line in f:
                r = json.loads(line)
                if r["type"] == "summary":
                    masks += r["masks"]
                    mask_ms += r["mask_ms"]
                    continue
                if r["type"] == "tokenizer":
                    continue
                if r["type"] == "walks":
                    # An item split across walker processes (--walk-range) reports per part.
                    agg = walk_counts.setdefault(r["id"], [0, 0])
                    agg[0] += r["done"]
                    agg[1] += r["requested"]
                    continue
                it = by_id[r["id"]]
                k = kinds.setdefault(it["kind"], {"items": 0, "compiled": 0, "docs": 0,
                                                  "docs_ok": 0, "walks": 0, "done": 0,
                                                  "valid": 0, "cap": 0, "budget": 0, "bad": 0,
                                                  "items_no_finished_walk": 0, "_fin": {}})
                if r["type"] == "compile":
                    if r["id"] in k["_fin"]:
                        continue  # the same item from another part of a split run
                    k["items"] += 1
                    k["_fin"][r["id"]] = 0
                    if r["ok"]:
                        k["compiled"] += 1
                        compile_ms.append(r["ms"])
                    else:
                        failures.append("%s: does not compile: %s" % (r["id"], r["error"]))
                elif r["type"] == "doc":
                    k["docs"] += 1
                    if r["ok"]:
                        k["docs_ok"] += 1
                    else:
                        failures.append("%s: document %d rejected: %s" % (r["id"], r["index"],
                                                                           json.dumps(r)[:400]))
                elif r["type"] == "walk":
                    k["walks"] += 1
                    st = r["status"]
                    # budget: the item's time budget; work_budget: the matcher's per-mask work
                    # budget (issue 14), which ends such a request with an error by design.
                    if st in ("cap", "budget", "work_budget"):
                        k["cap" if st == "cap" else "budget"] += 1
                    elif st == "done":
                        k["done"] += 1
                        k["_fin"][r["id"]] += 1
                        reason = v.check(it, bytes.fromhex(r["hex"]))
                        if reason is None:
                            k["valid"] += 1
                        else:
                            k["bad"] += 1
                            failures.append("%s: walk %d output %r invalid: %s" % (
                                r["id"], r["index"], bytes.fromhex(r["hex"])[:300], reason))
                    else:
                        k["bad"] += 1
                        failures.append("%s: walk %d %s" % (r["id"], r["index"], st))
    for ident, (done, requested) in sorted(walk_counts.items()):
        if done < requested:
            short_items.append((ident, done, requested))
    seen_ids = set()
    for k in kinds.values():
        seen_ids.update(k["_fin"].keys())
    for ident in by_id:
        if ident not in seen_ids:
            failures.append("%s: the walker produced no result for it" % ident)
    for k in kinds.values():
        k["items_no_finished_walk"] = sum(1 for n in k.pop("_fin").values() if n == 0)
    for ident, doc, why in stats["bad_expectation"]:
        failures.append("%s: corpus expectation is wrong (%s): %s" % (ident, why, doc))

    print("items: %d, documents: %d, walks per item: %d, max tokens per walk: %d" % (
        len(items), n_docs, args.walks, args.max_tokens))
    for name in sorted(kinds):
        k = kinds[name]
        print("  %-12s items %4d compiled %4d | docs %5d accepted %5d | walks %6d finished %6d "
              "valid %6d invalid/stuck %d capped %d cut by budget %d | items with no finished "
              "walk %d" % (name, k["items"], k["compiled"], k["docs"], k["docs_ok"], k["walks"],
                           k["done"], k["valid"], k["bad"], k["cap"], k["budget"],
                           k["items_no_finished_walk"]))
    compile_ms.sort()
    if compile_ms:
        print("compile ms: median %.3f p99 %.3f max %.3f" % (
            compile_ms[len(compile_ms) // 2], compile_ms[int(len(compile_ms) * 0.99)],
            compile_ms[-1]))
    print("masks %d, mean mask %.3f ms; walker wall time %.1f s with %d processes" % (
        masks, mask_ms / max(masks, 1), walk_seconds, args.jobs))
    if short_items:
        print("items whose walks were cut short by --item-budget-s (walks done/requested):")
        for ident, done, req in sorted(short_items):
            print("  %s %d/%d" % (ident, done, req))
    if args.report:
        with open(args.report, "w") as f:
            json.dump({"kinds": kinds, "failures": failures, "masks": masks,
                       "mask_ms": mask_ms, "walk_seconds": walk_seconds,
                       "walks": args.walks, "max_tokens": args.max_tokens,
                       "short_items": short_items}, f, indent=1)
    for msg in failures[:50]:
        print("FAIL " + msg)
    if failures:
        print("%d failures" % len(failures))
        return 1
    print("OK")
    return 0


if __name__ == "__main__":
    sys.exit(main())
