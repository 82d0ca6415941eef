#!/usr/bin/env python3
"""Writes corpus/ from the hand-written item lists (corpus_schemas.py, corpus_grammars.py).

The generated files are committed; rerun this after editing the lists.
"""

import json
import os
import shutil

import corpus_grammars
import corpus_schemas

HERE = os.path.dirname(os.path.abspath(__file__))


def refs_of(node, out):
    if isinstance(node, dict):
        for k, v in node.items():
            if k == "$ref" and isinstance(v, str):
                out.append(v)
            refs_of(v, out)
    elif isinstance(node, list):
        for v in node:
            refs_of(v, out)
    return out


def hoist(wrapper, inner):
    """Moves inner's $defs/definitions to the wrapper root so '#/$defs/..' refs still resolve;
    None when inner uses other refs (whose meaning would change under a new root)."""
    refs = refs_of(inner, [])
    if not all(r.startswith("#/$defs/") or r.startswith("#/definitions/") for r in refs):
        return None
    for key in ("$defs", "definitions"):
        if isinstance(inner, dict) and key in inner:
            wrapper.setdefault(key, {}).update(inner[key])
    return wrapper


def write(kind_dir, index, name, payload):
    path = os.path.join(HERE, "corpus", kind_dir, "%03d_%s.json" % (index, name))
    with open(path, "w", encoding="utf-8") as f:
        json.dump(payload, f, ensure_ascii=False, indent=1)
        f.write("\n")


def main():
    for d in ("schema", "regex", "ebnf", "json_object"):
        shutil.rmtree(os.path.join(HERE, "corpus", d), ignore_errors=True)
        os.makedirs(os.path.join(HERE, "corpus", d))
    n = 0
    for item in corpus_schemas.BASE:
        name, schema, values = item[:3]
        texts = item[3] if len(item) > 3 else []
        write("schema", n, name, {"kind": "json_schema", "schema": schema, "valid": values,
                                  "valid_text": texts})
        n += 1
    for name, schema, values, base in corpus_schemas.wrap_variants(corpus_schemas.BASE):
        # The base schema now sits under a wrapper: its '#/$defs/..' refs need the defs at the
        # new root (a stale copy left in place is inert); other refs would change meaning.
        if isinstance(base, dict) and "$id" in base:
            continue  # $id is only accepted at the root
        if refs_of(base, []) and hoist(schema, base) is None:
            continue
        write("schema", n, name, {"kind": "json_schema", "schema": schema, "valid": values,
                                  "valid_text": []})
        n += 1
    for i, (name, pattern, valid) in enumerate(corpus_grammars.REGEXES):
        write("regex", i, name, {"kind": "regex", "regex": pattern, "valid": valid})
    for i, (name, text, valid) in enumerate(corpus_grammars.EBNF):
        write("ebnf", i, name, {"kind": "ebnf", "ebnf": text, "valid": valid})
    write("json_object", 0, "any_object", {
        "kind": "json_object",
        "valid_text": ["{}", '{"a": 1}', '{"nested": {"list": [1, 2.5, "x", null, true, false, {}]}}',
                       '{\n  "k": "v\\u00e9\\n"\n}', '{"😀": []}']})
    print("wrote %d schemas, %d regexes, %d EBNF grammars, 1 json_object" % (
        n, len(corpus_grammars.REGEXES), len(corpus_grammars.EBNF)))


if __name__ == "__main__":
    main()
