#!/usr/bin/env python3
"""Validates finished walk outputs of schema_corpus_bench against their schemas (issue 21).

Input: JSON lines {"file": corpus file name, "walk": i, "hex": output bytes as hex}. Each output
must be UTF-8, strict JSON, and valid under its schema with Debian's python3-jsonschema: the
validator class the schema's `$schema` names (draft 4, 6, 7, 2019-09, 2020-12; 2020-12 when
absent) with a format checker (tests/grammar/check_corpus.py's: jsonschema's checkers, plus
our own `date`/`time`/`date-time` where the optional backend is missing, and the checkers below
for formats jsonschema leaves unchecked without optional packages). Prints one summary line
"validated N, valid V, invalid I" and one line per invalid output; exit status 1 if any is
invalid.
"""

import argparse
import json
import os
import re
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "..", "tests", "grammar"))

import check_corpus  # noqa: E402
import jsonschema  # noqa: E402


def hostname_ok(s):
    # RFC 1123 host name: dot-separated labels of 1-63 letters, digits and hyphens, not starting or
    # ending with a hyphen; at most 253 characters. (jsonschema needs the `fqdn` package.)
    if not isinstance(s, str):
        return True
    if not 1 <= len(s) <= 253:
        return False
    label = re.compile(r"[A-Za-z0-9](?:[A-Za-z0-9-]{0,61}[A-Za-z0-9])?\Z", re.ASCII)
    return all(label.match(x) for x in s.split("."))


DURATION = re.compile(
    r"P(?:(?:\d+Y(?:\d+M)?(?:\d+D)?|\d+M(?:\d+D)?|\d+D)(?:T(?:\d+H(?:\d+M)?(?:\d+S)?|\d+M(?:\d+S)?"
    r"|\d+S))?|T(?:\d+H(?:\d+M)?(?:\d+S)?|\d+M(?:\d+S)?|\d+S)|\d+W)\Z", re.ASCII)


def duration_ok(s):
    # RFC 3339 appendix A `duration` (what draft 2019-09 on points to).
    return not isinstance(s, str) or bool(DURATION.match(s))


def checker():
    fc, _, _ = check_corpus.format_checker()
    if "hostname" not in fc.checkers:
        fc.checks("hostname")(hostname_ok)
    if "duration" not in fc.checkers:
        fc.checks("duration")(duration_ok)
    return fc


def validator_class(schema):
    uri = schema.get("$schema", "") if isinstance(schema, dict) else ""
    for tag, cls in (("draft-04", jsonschema.Draft4Validator),
                     ("draft-06", jsonschema.Draft6Validator),
                     ("draft-07", jsonschema.Draft7Validator),
                     ("2019-09", jsonschema.Draft201909Validator)):
        if tag in uri:
            return cls
    return jsonschema.Draft202012Validator


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--corpus", default=os.path.join(HERE, "corpus"))
    ap.add_argument("--walks", required=True, help="JSON lines written by schema_corpus_bench")
    a = ap.parse_args()
    fc = checker()
    validators = {}
    total = valid = 0
    bad = []
    per_file = {}
    with open(a.walks, encoding="utf-8") as f:
        for line in f:
            if not line.strip():
                continue
            r = json.loads(line)
            name = r["file"]
            if name not in validators:
                with open(os.path.join(a.corpus, name), encoding="utf-8") as sf:
                    schema = json.load(sf)
                validators[name] = validator_class(schema)(schema, format_checker=fc)
            total += 1
            per_file[name] = per_file.get(name, 0) + 1
            raw = bytes.fromhex(r["hex"])
            try:
                value = check_corpus.strict_json(raw.decode("utf-8"))
                err = next(iter(validators[name].iter_errors(value)), None)
                reason = None if err is None else "jsonschema: %s at %s" % (
                    err.message[:200], "/".join(str(p) for p in err.absolute_path))
            except (UnicodeDecodeError, ValueError) as e:
                reason = "not JSON: %s" % e
            if reason is None:
                valid += 1
            else:
                bad.append((name, r["walk"], reason, raw[:300]))
    print("validated %d, valid %d, invalid %d, schemas with a finished walk %d" %
          (total, valid, len(bad), len(per_file)))
    for name, walk, reason, raw in bad:
        print("INVALID %s walk %d: %s: %r" % (name, walk, reason, raw))
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
