#!/usr/bin/env python3
"""Draws the real-world JSON Schema corpus (issue 21) from a bare git mirror of SchemaStore.

Rules, in order:
  1. every `src/schemas/json/**/*.json` file of the mirror's HEAD that parses as JSON (a mirror
     may omit its largest blobs; those are counted and skipped, and are all far over rule 3);
  2. self-contained only: every `$ref` in it starts with '#' (a remote `http(s)://` or a
     relative file reference would need documents outside the file; 119 of 956 are dropped);
  3. at most 32 KiB written compactly (keeps the committed corpus under 3 MB; drops the largest
     fifth, about 170 schemas);
  4. stratified by size: the survivors sorted by compact size (then path) are cut into four
     quartiles and 90 schemas are drawn from each with random.Random(SEED).sample over the
     quartile in path order: 360 schemas.
Each drawn schema is written compactly (same key order, same values: only whitespace differs)
to corpus/<quartile><index>_<name>.json, and manifest.json records its repository, path, commit,
git blob id, original and compact size and stratum.

Usage: draw_corpus.py --mirror /path/to/SchemaStore+schemastore/repo [--out DIR]
"""

import argparse
import json
import os
import random
import re
import subprocess

REPO = "SchemaStore/schemastore"
PREFIX = "src/schemas/json/"
MAX_BYTES = 32 * 1024
PER_STRATUM = 90
SEED = 21


def git(mirror, *args):
    return subprocess.run(["git", "--git-dir", mirror, *args], capture_output=True,
                          check=True).stdout


def refs(x, out):
    if isinstance(x, dict):
        for k, v in x.items():
            if k == "$ref" and isinstance(v, str):
                out.append(v)
            refs(v, out)
    elif isinstance(x, list):
        for v in x:
            refs(v, out)


def compact(schema):
    return json.dumps(schema, separators=(",", ":"), ensure_ascii=False)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--mirror", required=True)
    ap.add_argument("--out", default=os.path.dirname(os.path.abspath(__file__)))
    a = ap.parse_args()
    commit = git(a.mirror, "rev-parse", "HEAD").decode().strip()
    listing = git(a.mirror, "ls-tree", "-r", "-l", "HEAD", PREFIX).decode().splitlines()
    seen = absent = unparsable = remote = too_big = 0
    candidates = []
    for line in listing:
        meta, path = line.split("\t", 1)
        _, _, blob, size = meta.split()
        if not path.endswith(".json"):
            continue
        seen += 1
        try:
            schema = json.loads(git(a.mirror, "show", blob))
        except subprocess.CalledProcessError:  # the mirror may omit its largest blobs
            absent += 1
            continue
        except ValueError:
            unparsable += 1
            continue
        r = []
        refs(schema, r)
        if any(not x.startswith("#") for x in r):
            remote += 1
            continue
        text = compact(schema)
        if len(text.encode()) > MAX_BYTES:
            too_big += 1
            continue
        candidates.append({"path": path, "blob": blob, "bytes": int(size),
                           "compact_bytes": len(text.encode()), "text": text})
    candidates.sort(key=lambda c: (c["compact_bytes"], c["path"]))
    n = len(candidates)
    rng = random.Random(SEED)
    corpus_dir = os.path.join(a.out, "corpus")
    os.makedirs(corpus_dir, exist_ok=True)
    for f in os.listdir(corpus_dir):
        if f.endswith(".json"):
            os.remove(os.path.join(corpus_dir, f))
    manifest = []
    for q in range(4):
        stratum = sorted(candidates[q * n // 4:(q + 1) * n // 4], key=lambda c: c["path"])
        lo, hi = stratum[0]["compact_bytes"], stratum[-1]["compact_bytes"]
        picked = sorted(rng.sample(stratum, PER_STRATUM), key=lambda c: c["path"])
        for i, c in enumerate(picked):
            name = re.sub(r"[^A-Za-z0-9._-]", "_", c["path"][len(PREFIX):])
            fname = "q%d_%02d_%s" % (q + 1, i, name)
            with open(os.path.join(corpus_dir, fname), "w", encoding="utf-8") as f:
                f.write(c["text"] + "\n")
            manifest.append({"file": fname, "repo": REPO, "path": c["path"], "commit": commit,
                             "blob": c["blob"], "bytes": c["bytes"],
                             "compact_bytes": c["compact_bytes"],
                             "stratum": "q%d (%d-%d bytes)" % (q + 1, lo, hi)})
    with open(os.path.join(a.out, "manifest.json"), "w", encoding="utf-8") as f:
        json.dump({"repo": REPO, "commit": commit, "seed": SEED, "max_bytes": MAX_BYTES,
                   "per_stratum": PER_STRATUM,
                   "counts": {"json_files": seen, "absent_from_mirror": absent, "unparsable": unparsable,
                              "non_local_ref": remote, "over_max_bytes": too_big,
                              "candidates": n, "drawn": len(manifest)},
                   "schemas": manifest}, f, indent=1)
        f.write("\n")
    total = sum(m["compact_bytes"] for m in manifest)
    print("%d json files (%d absent from the mirror), %d unparsable, %d with non-local $ref, %d over %d bytes; %d candidates,"
          " %d drawn, %d bytes" % (seen, absent, unparsable, remote, too_big, MAX_BYTES, n,
                                   len(manifest), total))


if __name__ == "__main__":
    main()
