"""Valid-instance generator for JSON schemas, independent of the grammar engine (test code).

It reads the schema directly and picks values; every candidate is then checked with jsonschema,
and only those that pass are used, so a generator mistake can only lose documents, never add a
wrong expectation. Patterns and allOf are not generated (hand-written documents cover them).
"""

import json
import random

FORMAT_EXAMPLES = {
    "date": ["2024-02-29", "1999-12-31", "0001-01-01", "2023-11-30"],
    "time": ["23:59:59Z", "00:00:00+05:30", "12:30:45.123-08:00"],
    "date-time": ["2024-02-29T23:59:59Z", "1970-01-01T00:00:00.5+01:00"],
    "email": ["a@b.co", "first.last+tag@mail.example.org", "x_y@sub-domain.example.com"],
    "uuid": ["123e4567-e89b-12d3-a456-426614174000", "ABCDEF01-2345-6789-abcd-ef0123456789"],
    "ipv4": ["0.0.0.0", "255.255.255.255", "192.168.1.20", "10.0.100.9"],
    "uri": ["https://example.com/a/b?x=1#frag", "urn:isbn:0451450523", "mailto:a@b.c",
            "file:///tmp/x%20y", "http://user:pw@host:8080/"],
}

CHARS = list("abcXYZ019 _-.,:;!?/") + ["\"", "\\", "\n", "\t", "é", "中", "😀", "\u0001", "\u007f",
                                      "ß", "Ω", "\u2028"]


class Skip(Exception):
    pass


def resolve(root, ref):
    if not ref.startswith("#"):
        raise Skip()
    node = root
    for tok in ref[1:].split("/")[1:]:
        tok = tok.replace("~1", "/").replace("~0", "~")
        node = node[int(tok)] if isinstance(node, list) else node[tok]
    return node


def any_value(rng, depth):
    choice = rng.randrange(7 if depth < 3 else 5)
    if choice == 0:
        return None
    if choice == 1:
        return rng.choice([True, False])
    if choice == 2:
        return rng.randint(-1000, 1000)
    if choice == 3:
        return round(rng.uniform(-100, 100), 2)
    if choice == 4:
        return "".join(rng.choice(CHARS) for _ in range(rng.randrange(6)))
    if choice == 5:
        return [any_value(rng, depth + 1) for _ in range(rng.randrange(3))]
    return {"k%d" % i: any_value(rng, depth + 1) for i in range(rng.randrange(3))}


ANNOTATIONS = {"title", "description", "examples", "$comment", "default", "deprecated",
               "readOnly", "writeOnly", "$schema", "$id", "$defs", "definitions"}


def bounds(s, integer):
    lo, hi = s.get("minimum"), s.get("maximum")
    if "exclusiveMinimum" in s:
        x = s["exclusiveMinimum"]
        lo = max(lo, x + (1 if integer else 0.01)) if lo is not None else x + (1 if integer else 0.01)
    if "exclusiveMaximum" in s:
        x = s["exclusiveMaximum"]
        hi = min(hi, x - (1 if integer else 0.01)) if hi is not None else x - (1 if integer else 0.01)
    return lo, hi


def gen(root, s, rng, depth):
    if depth > 12:
        raise Skip()
    if s is True or s == {}:
        return any_value(rng, depth)
    if s is False:
        raise Skip()
    if "$ref" in s:
        return gen(root, resolve(root, s["$ref"]), rng, depth + 1)
    if "allOf" in s or "pattern" in s:
        raise Skip()
    if "const" in s:
        return s["const"]
    if "enum" in s:
        return rng.choice(s["enum"])
    for key in ("anyOf", "oneOf"):
        if key in s:
            if any(k not in ANNOTATIONS and k != key for k in s):
                raise Skip()
            return gen(root, rng.choice(s[key]), rng, depth + 1)
    t = s.get("type")
    if isinstance(t, list):
        t = rng.choice(t)
    if t is None:
        if "properties" in s or "required" in s:
            t = "object"
        elif "items" in s or "prefixItems" in s:
            t = "array"
        elif "minLength" in s or "maxLength" in s or "format" in s:
            t = "string"
        elif "minimum" in s or "maximum" in s:
            t = "number"
        else:
            return any_value(rng, depth)
    if t == "null":
        return None
    if t == "boolean":
        return rng.choice([True, False])
    if t == "integer":
        lo, hi = bounds(s, True)
        lo = int(-(-lo // 1)) if lo is not None else (hi - 50 if hi is not None else -1000)
        hi = int(hi // 1) if hi is not None else lo + 2000
        return rng.choice([lo, hi, rng.randint(lo, hi)])
    if t == "number":
        lo, hi = bounds(s, False)
        lo = lo if lo is not None else (hi - 50 if hi is not None else -1e3)
        hi = hi if hi is not None else lo + 2e3
        x = rng.choice([lo, hi, round(rng.uniform(lo, hi), 3), int(rng.uniform(lo, hi))])
        if "e" in json.dumps(x):
            raise Skip()  # bounded numbers are emitted without exponents (documented)
        return x
    if t == "string":
        if "format" in s:
            return rng.choice(FORMAT_EXAMPLES[s["format"]])
        lo = s.get("minLength", 0)
        hi = min(s.get("maxLength", lo + 8), lo + 8)
        return "".join(rng.choice(CHARS) for _ in range(rng.randint(lo, hi)))
    if t == "array":
        prefix = s.get("prefixItems", [])
        lo = s.get("minItems", 0)
        hi = s.get("maxItems", max(lo, len(prefix)) + 3)
        hi = min(hi, max(lo, len(prefix)) + 3, lo + 4 if depth > 3 else 1000)
        n = rng.randint(lo, max(lo, hi))
        out = []
        for i in range(n):
            if i < len(prefix):
                out.append(gen(root, prefix[i], rng, depth + 1))
            else:
                items = s.get("items", True if not prefix else False)
                if items is False:
                    break
                out.append(gen(root, items, rng, depth + 1))
        return out
    if t == "object":
        props = s.get("properties", {})
        req = set(s.get("required", []))
        out = {}
        for name, sub in props.items():
            if name in req or (depth < 4 and rng.random() < 0.5):
                out[name] = gen(root, sub, rng, depth + 1)
        for name in s.get("required", []):
            if name not in out:
                ap = s.get("additionalProperties", True)
                out[name] = gen(root, ap if isinstance(ap, dict) else True, rng, depth + 1)
        ap = s.get("additionalProperties")
        if isinstance(ap, dict) and rng.random() < 0.7:
            out["extra_%d" % rng.randrange(100)] = gen(root, ap, rng, depth + 1)
        return out
    raise Skip()


def generate(schema, count, seed, validator):
    """Up to `count` distinct valid instances (validated with the given jsonschema validator)."""
    rng = random.Random(seed)
    out, seen = [], set()
    for _ in range(count * 8):
        if len(out) >= count:
            break
        try:
            v = gen(schema, schema, rng, 0)
        except (Skip, KeyError, IndexError, TypeError, ValueError):
            continue
        key = json.dumps(v, sort_keys=False)
        if key in seen or not validator.is_valid(v):
            continue
        seen.add(key)
        out.append(v)
    return out


def depth_of(v):
    if isinstance(v, dict):
        return 1 + max((depth_of(x) for x in v.values()), default=0)
    if isinstance(v, list):
        return 1 + max((depth_of(x) for x in v), default=0)
    return 0


def serializations(v, max_whitespace=16):
    """The value in compact, spaced and (when gaps fit the whitespace bound) indented form."""
    out = [json.dumps(v, ensure_ascii=False, separators=(",", ":")),
           json.dumps(v, ensure_ascii=False)]
    if 1 + 2 * depth_of(v) <= max_whitespace:
        out.append(json.dumps(v, ensure_ascii=False, indent=2))
    return out
