#!/usr/bin/env python3
"""Checks the programmatic-dependent-launch rule of the CUDA code (backend/cuda/launch.cuh).

launch_kernel() launches every kernel of src/deepinfer/*/cuda with the PDL attribute, so a kernel
may be scheduled before the one ahead of it in the stream has finished. That is safe only if the
kernel waits first. Rules, each violation reported as `file:line: <what>`:
  (a) every __global__ function defined there starts with `pdl_grid_begin();` (or its form
      `pdl_grid_begin(weights_only);`, whose argument runs first and reads only weights, also as
      `const auto name = pdl_grid_begin(weights_only);`, keeping what it returns);
  (b) no launch there uses the `<<<...>>>` syntax (it would bypass launch_kernel and, after a
      kernel that released its dependents early, still be ordered, but the rule keeps one way).
Comments and string literals are ignored. Exits 1 on any violation.
--self-test checks the checker on a generated tree with one violation of each rule.
Python 3 standard library only.
"""

import argparse
import contextlib
import io
import os
import re
import sys
import tempfile

CUDA_DIRS = ("src/deepinfer/backend/cuda", "src/deepinfer/runtime/cuda")
EXTS = (".cu", ".cuh")
BEGIN = "pdl_grid_begin("
# The weights form whose result the kernel keeps: `const auto name = pdl_grid_begin(`.
KEPT = re.compile(r"const\s+auto\s+\w+\s*=\s*pdl_grid_begin\(")


def strip_comments(text):
    """Blanks comments and string/char literals, keeping every newline (line numbers hold)."""
    out, i, n = [], 0, len(text)
    while i < n:
        if text.startswith("//", i):
            j = text.find("\n", i)
            j = n if j < 0 else j
            out.append(" " * (j - i))
            i = j
        elif text.startswith("/*", i):
            j = text.find("*/", i + 2)
            j = n if j < 0 else j + 2
            out.append(re.sub(r"[^\n]", " ", text[i:j]))
            i = j
        elif text[i] in "\"'":
            q, j = text[i], i + 1
            while j < n and text[j] != q and text[j] != "\n":
                j += 2 if text[j] == "\\" else 1
            j = min(j + 1, n)
            out.append(q + " " * (j - i - 2) + q if j - i >= 2 else text[i:j])
            i = j
        else:
            out.append(text[i])
            i += 1
    return "".join(out)


def check_text(text):
    """(line, message) for each violation in one file's text."""
    code = strip_comments(text)
    found = []
    line_of = lambda pos: code.count("\n", 0, pos) + 1
    for m in re.finditer(r"<<<", code):
        found.append((line_of(m.start()), "kernel launched with <<<>>>: use launch_kernel() "
                      "(rule b)"))
    for m in re.finditer(r"\b__global__\b", code):
        depth, j = 0, m.end()
        while j < len(code):
            c = code[j]
            if c == "(":
                depth += 1
            elif c == ")":
                depth -= 1
            elif depth == 0 and c == ";":
                j = -1  # a declaration, no body
                break
            elif depth == 0 and c == "{":
                break
            j += 1
        if j < 0 or j >= len(code):
            continue
        body = code[j + 1:].lstrip()
        if not body.startswith(BEGIN) and not KEPT.match(body):
            name = re.findall(r"(\w+)\s*\(", code[m.end():j])
            kernel = next((w for w in name if w != "__launch_bounds__"), "?")
            found.append((line_of(m.start()), "kernel {} does not start with {}) (rule a)".format(
                kernel, BEGIN)))
    return found


def check_tree(root):
    violations = []
    for top in CUDA_DIRS:
        base = os.path.join(root, top)
        for dirpath, _, files in os.walk(base):
            for f in sorted(files):
                if not f.endswith(EXTS):
                    continue
                path = os.path.join(dirpath, f)
                with open(path, encoding="utf-8") as fh:
                    text = fh.read()
                rel = os.path.relpath(path, root)
                violations += [(rel, line, msg) for line, msg in check_text(text)]
    return sorted(violations)


def run(root):
    violations = check_tree(root)
    for f, line, msg in violations:
        print("{}:{}: {}".format(f, line, msg))
    if violations:
        print("check_pdl: {} violation(s); see src/deepinfer/backend/cuda/launch.cuh".format(
            len(violations)), file=sys.stderr)
        return 1
    return 0


GOOD = """// a kernel<<<grid, block>>> in a comment is fine
#include "deepinfer/backend/cuda/launch.cuh"
template <int N>
__global__ void __launch_bounds__(256, 2)
    good_kernel(const float* x, float* y) {
  pdl_grid_begin();
  y[threadIdx.x] = x[threadIdx.x];
}
__global__ void early_kernel(const float* w, float* y) {
  pdl_grid_begin([&] { prefetch(w); });
  y[0] = w[0];
}
__global__ void kept_kernel(const float* w, float* y) {
  const auto wv = pdl_grid_begin([&] { return w[0]; });
  y[0] = wv;
}
__global__ void declared_only(float* y);
void run(float* y, cudaStream_t s) {
  const char* msg = "<<<not a launch>>>";
  launch_kernel(good_kernel<1>, 1, 256, 0, s, y, y);
}
"""

BAD = {  # file -> (text, [(line, needle)])
    "src/deepinfer/backend/cuda/bad_wait.cu": (
        "__global__ void late_kernel(float* y) {\n"
        "  y[0] = 1;\n"
        "  pdl_grid_begin();\n"
        "}\n", [(1, "late_kernel")]),
    "src/deepinfer/backend/cuda/bad_kept.cu": (
        "__global__ void read_first(const float* x, float* y) {\n"
        "  const auto v = x[0];\n"
        "  const auto w = pdl_grid_begin([&] { return 1.0f; });\n"
        "  y[0] = v * w;\n"
        "}\n", [(1, "read_first")]),
    "src/deepinfer/runtime/cuda/bad_launch.cu": (
        "void run(float* y, cudaStream_t s) {\n"
        "  // launch_kernel(k, 1, 1, 0, s, y);\n"
        "  k<<<1, 1, 0, s>>>(y);\n"
        "}\n", [(3, "<<<>>>")]),
}


def write(root, rel, text):
    path = os.path.join(root, rel)
    os.makedirs(os.path.dirname(path), exist_ok=True)
    with open(path, "w", encoding="utf-8") as fh:
        fh.write(text)


def self_test():
    failures = []
    with tempfile.TemporaryDirectory(prefix="pdl_lint_") as root:
        write(root, "src/deepinfer/backend/cuda/good.cu", GOOD)
        write(root, "src/deepinfer/backend/cuda/good.cuh", GOOD)
        write(root, "src/deepinfer/model/outside.cu", BAD["src/deepinfer/runtime/cuda/"
                                                           "bad_launch.cu"][0])
        got = check_tree(root)
        for v in got:
            failures.append("clean tree reported {}:{}: {}".format(*v))
        for rel, (text, _) in BAD.items():
            write(root, rel, text)
        got = check_tree(root)
        expected = sum(len(w) for _, w in BAD.values())
        for rel, (_, wants) in BAD.items():
            for line, needle in wants:
                if not any(f == rel and ln == line and needle in msg for f, ln, msg in got):
                    failures.append("{}:{}: expected a violation naming {}, got {}".format(
                        rel, line, needle, got))
        if len(got) != expected:
            failures.append("expected {} violations, got {}".format(expected, got))
        with contextlib.redirect_stdout(io.StringIO()), contextlib.redirect_stderr(io.StringIO()):
            if run(root) == 0:
                failures.append("tree with violations: exit status 0")
    for f in failures:
        print("SELF-TEST FAILURE: " + f, file=sys.stderr)
    if failures:
        return 1
    print("pdl self-test: clean files pass; {} violations reported".format(expected))
    return 0


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--root", default=os.path.join(os.path.dirname(__file__), "..", ".."))
    ap.add_argument("--self-test", action="store_true")
    args = ap.parse_args()
    if args.self_test:
        return self_test()
    return run(os.path.abspath(args.root))


if __name__ == "__main__":
    sys.exit(main())
