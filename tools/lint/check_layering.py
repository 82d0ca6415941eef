#!/usr/bin/env python3
"""Checks the include layering of src/deepinfer (DESIGN.md, "Dependencies point downward only").

Rules, each violation reported as `file:line: <module> must not include <header> (<rule>)`:
  (a) the pure CPU modules (kv, sched, sample, grammar, tokenizer, recipe) include no model/,
      backend/, runtime/, engine/ or server/ header;
  (b) engine includes no model/ or backend/ header: it knows models only through runtime/;
  (c) only files under backend/cuda/ and runtime/cuda/ include CUDA headers;
  (d) a module includes only the modules ALLOWED lists for it (the CMake link graph, downward
      along base <- tensor <- loader <- backend <- model <- runtime <- engine <- server, with
      cli and python on top). Test files (*_test.cc and test-only helpers) may also include the
      modules their test targets link (TEST_ALLOWED), and test-only helpers (*test_util*.h,
      *_for_tests.h, testing/) of any module below theirs.

Exits 1 on any violation. --self-test checks the checker on generated trees.
Python 3 standard library only.
"""

import argparse
import contextlib
import io
import os
import re
import sys
import tempfile

# Module -> modules its headers and sources may include (besides itself). Mirrors the
# target_link_libraries of each src/deepinfer/<module>/CMakeLists.txt; change both together.
ALLOWED = {
    "base": set(),
    "tensor": {"base"},
    "loader": {"base", "tensor"},
    "backend": {"base", "tensor", "loader"},
    # tokenizer: V4.1 Engram builds its compressed token map from the token strings.
    "model": {"base", "tensor", "loader", "backend", "tokenizer"},
    "tokenizer": {"base"},
    "recipe": {"base"},
    "grammar": {"base", "tokenizer"},
    "kv": {"base"},
    "sched": {"base", "kv"},
    "sample": {"base"},
    "runtime": {"base", "tensor", "loader", "backend", "model", "kv"},
    "engine": {"base", "tensor", "kv", "sched", "sample", "grammar", "tokenizer", "recipe",
               "runtime"},
    # disagg moves opaque states (header + bytes) between workers: it knows no engine.
    "disagg": {"base"},
    "server": {"base", "tensor", "tokenizer", "recipe", "grammar", "sample", "engine", "disagg"},
    # router never links the engine: it reaches the replicas over HTTP (docs/decisions/0010).
    "router": {"base"},
}
# The top: the binary and the bindings may include any module.
TOP = {"cli", "python"}
ALLOWED.update({m: set(ALLOWED) for m in TOP})

# Extra modules a module's test files may include: what its test targets link beyond the library
# (e.g. recipe_tool_call_grammar_test links deepinfer_grammar).
TEST_ALLOWED = {
    "recipe": {"tokenizer", "grammar"},
}

PURE = {"kv", "sched", "sample", "grammar", "tokenizer", "recipe"}
PURE_FORBIDDEN = {"model", "backend", "runtime", "engine", "server"}
ENGINE_FORBIDDEN = {"model", "backend"}
CUDA_DIRS = ("backend/cuda/", "runtime/cuda/")

CUDA_HEADERS = {
    "cuda.h", "cuda_runtime.h", "cuda_runtime_api.h", "cuda_bf16.h", "cuda_fp16.h",
    "cuda_fp8.h", "cuda_fp4.h", "cublasLt.h", "cublas_v2.h", "cublas_api.h",
}
CUDA_PREFIXES = ("cooperative_groups", "cub/", "cuda/", "thrust/")

SOURCE_EXTS = (".h", ".hh", ".hpp", ".inl", ".ipp", ".inc", ".cc", ".cpp", ".cxx", ".cu",
               ".cuh")

RULE_A = "(a: {m} is pure CPU logic, with no model/, backend/, runtime/, engine/ or server/ header)"
RULE_B = "(b: engine knows models only through runtime/)"
RULE_C = "(c: only backend/cuda/ and runtime/cuda/ include CUDA headers)"
RULE_D = "(d: {m} may include only {allowed})"
RULE_UNKNOWN = ("module {m} is not in the layering table (d: add it to ALLOWED in "
                "tools/lint/check_layering.py)")

INCLUDE_RE = re.compile(r'^\s*#\s*include\s*([<"])([^>"]+)[>"]')


def closure(module):
    """Every module reachable downward from `module` through ALLOWED (and its test links)."""
    seen = set()
    stack = list(ALLOWED.get(module, set()) | TEST_ALLOWED.get(module, set()))
    while stack:
        m = stack.pop()
        if m in seen:
            continue
        seen.add(m)
        stack.extend(ALLOWED.get(m, set()))
    return seen


def is_test_helper(rel):
    """rel: path under src/deepinfer. Headers only tests use."""
    base = os.path.basename(rel)
    return ("test_util" in base or base.endswith("_for_tests.h")
            or "/testing/" in "/" + rel)


def is_test_file(rel):
    base = os.path.splitext(os.path.basename(rel))[0]
    return base.endswith("_test") or is_test_helper(rel)


def is_cuda_header(name):
    return name in CUDA_HEADERS or name.endswith(".cuh") or name.startswith(CUDA_PREFIXES)


def strip_block_comments(text):
    """Blanks /* ... */ comments, keeping line numbers."""
    return re.sub(r"/\*.*?\*/", lambda m: "\n" * m.group(0).count("\n"), text, flags=re.S)


def includes(path):
    with open(path, encoding="utf-8", errors="replace") as f:
        text = strip_block_comments(f.read())
    for lineno, line in enumerate(text.splitlines(), 1):
        m = INCLUDE_RE.match(line)
        if m:
            yield lineno, m.group(1), m.group(2).strip()


def target_of(src_root, file_rel, delim, name):
    """The path under src/deepinfer that an include names, or None for an outside header."""
    if name.startswith("deepinfer/"):
        return name[len("deepinfer/"):]
    if delim == '"':
        # A quoted relative include resolves against the including file's directory first.
        here = os.path.dirname(os.path.join(src_root, file_rel))
        cand = os.path.normpath(os.path.join(here, name))
        if os.path.isfile(cand):
            rel = os.path.relpath(cand, src_root)
            if not rel.startswith(".."):
                return rel.replace(os.sep, "/")
    return None


def check_tree(root):
    """Returns sorted violations (file relative to root, line, message)."""
    src_root = os.path.join(root, "src", "deepinfer")
    out = []
    unknown_reported = set()
    for dirpath, dirnames, filenames in os.walk(src_root):
        dirnames.sort()
        for fn in sorted(filenames):
            if not fn.endswith(SOURCE_EXTS):
                continue
            full = os.path.join(dirpath, fn)
            rel = os.path.relpath(full, src_root).replace(os.sep, "/")
            if "/" not in rel:
                continue  # no module
            module = rel.split("/", 1)[0]
            shown = os.path.relpath(full, root).replace(os.sep, "/")
            if module not in ALLOWED and module not in unknown_reported:
                unknown_reported.add(module)
                out.append((shown, 1, RULE_UNKNOWN.format(m=module)))
            test = is_test_file(rel)
            below = closure(module)
            allowed = ALLOWED.get(module, set()) | (TEST_ALLOWED.get(module, set())
                                                    if test else set())
            in_cuda_dir = rel.startswith(CUDA_DIRS)
            for lineno, delim, name in includes(full):
                if is_cuda_header(name) and not in_cuda_dir:
                    out.append((shown, lineno, "{m} must not include {h} {r}".format(
                        m=module, h=name, r=RULE_C)))
                    continue
                target = target_of(src_root, rel, delim, name)
                if target is None or "/" not in target:
                    continue
                to = target.split("/", 1)[0]
                if to == module:
                    continue
                header = "deepinfer/" + target
                if test and is_test_helper(target) and to in below:
                    continue
                if module in PURE and to in PURE_FORBIDDEN:
                    rule = RULE_A.format(m=module)
                elif module == "engine" and to in ENGINE_FORBIDDEN:
                    rule = RULE_B
                elif module in ALLOWED and to not in allowed:
                    rule = RULE_D.format(m=module, allowed=", ".join(
                        m + "/" for m in sorted(allowed)) or "nothing of deepinfer")
                else:
                    continue
                out.append((shown, lineno, "{m} must not include {h} {r}".format(
                    m=module, h=header, r=rule)))
    out.sort()
    return out


def run(root):
    violations = check_tree(root)
    for f, line, msg in violations:
        print("{}:{}: {}".format(f, line, msg))
    if violations:
        print("{} layering violation(s)".format(len(violations)), file=sys.stderr)
        return 1
    return 0


# --- self-test -------------------------------------------------------------------------------

CLEAN_TREE = {
    "base/status.h": "#pragma once\n#include <string>\n",
    "tensor/dtype.h": '#include "deepinfer/base/status.h"\n',
    "loader/checkpoint.h": '#include "deepinfer/tensor/dtype.h"\n',
    "loader/test_util.h": "#include <string>\n",
    "backend/cpu/cpu_ops.h": '#include "deepinfer/tensor/dtype.h"\n',
    "backend/cuda/reduce.cuh": "#include <cuda_runtime.h>\n",
    "backend/cuda/gemm/gemm.cu": ('#include <cublasLt.h>\n#include <cub/cub.cuh>\n'
                                  '#include "deepinfer/backend/cuda/reduce.cuh"\n'
                                  '#include "deepinfer/loader/checkpoint.h"\n'),
    "model/deepseek_v4/config.h": '#include "deepinfer/backend/cpu/cpu_ops.h"\n',
    "model/deepseek_v4/tiny_model_for_tests.h": '#include "deepinfer/model/deepseek_v4/config.h"\n',
    "model/deepseek_v4/testing/flash_config.h": '#include "deepinfer/model/deepseek_v4/config.h"\n',
    "model/deepseek_v4/weights_test.cc": ('#include "deepinfer/loader/test_util.h"\n'
                                          '#include "deepinfer/model/deepseek_v4/config.h"\n'),
    "kv/page_spec.h": "#pragma once\n#include <cstdint>\n",
    "kv/kv_manager.h": ('#include "deepinfer/base/status.h"\n#include "page_spec.h"\n'
                        '/* #include "deepinfer/model/deepseek_v4/config.h"\n'
                        '   #include <cuda_runtime.h> */\n'
                        '// #include "deepinfer/engine/engine.h"\n'),
    "kv/kv_manager_test.cc": '#include "deepinfer/kv/kv_manager.h"\n#include <gtest/gtest.h>\n',
    "sched/scheduler.h": '#include "deepinfer/kv/kv_manager.h"\n',
    "sched/scheduler_test_util.h": '#include "deepinfer/sched/scheduler.h"\n',
    "tokenizer/tokenizer.h": '#include "deepinfer/base/status.h"\n',
    "grammar/grammar.h": '#include "deepinfer/tokenizer/tokenizer.h"\n',
    "recipe/chat_encoder.h": '#include "deepinfer/base/status.h"\n',
    "recipe/tool_call_grammar_test.cc": ('#include "deepinfer/grammar/grammar.h"\n'
                                         '#include "deepinfer/tokenizer/tokenizer.h"\n'),
    "sample/sampler.h": '#include "deepinfer/base/status.h"\n',
    "runtime/model_runner.h": '#include "deepinfer/kv/page_spec.h"\n',
    "runtime/cpu/cpu_runner.cc": '#include "deepinfer/model/deepseek_v4/config.h"\n',
    "runtime/cuda/cuda_runner.cc": ('#include <cuda_runtime.h>\n#include <cuda/std/atomic>\n'
                                    '#include "deepinfer/backend/cuda/reduce.cuh"\n'
                                    '#include "deepinfer/model/deepseek_v4/config.h"\n'),
    "engine/engine.h": "#pragma once\n",
    "engine/engine.cc": ('#include "deepinfer/runtime/model_runner.h"\n'
                         '#include "deepinfer/sched/scheduler.h"\n'
                         '#include "deepinfer/grammar/grammar.h"\n'),
    "engine/engine_test.cc": '#include "deepinfer/model/deepseek_v4/tiny_model_for_tests.h"\n',
    "server/http_server.cc": '#include "deepinfer/engine/engine.h"\n',
    "router/proxy.cc": '#include "deepinfer/base/status.h"\n',
    "server/tool_choice_test.cc": ('#include "deepinfer/model/deepseek_v4/tiny_model_for_tests.h"\n'
                                   '#include "deepinfer/server/protocol_test_util.h"\n'),
    "server/protocol_test_util.h": '#include "deepinfer/engine/engine.h"\n',
    "cli/main.cc": ('#include "deepinfer/model/deepseek_v4/config.h"\n'
                    '#include "deepinfer/backend/cpu/cpu_ops.h"\n'
                    '#include "deepinfer/server/http_server.h"\n'),
    "python/engine_bindings.cc": '#include "deepinfer/model/deepseek_v4/tiny_model_for_tests.h"\n',
}

# path -> (content, [(line, rule letter, header substring)]) expected violations.
VIOLATIONS = {
    "kv/bad_model.cc": ('#include "deepinfer/base/status.h"\n'
                        '#include "deepinfer/model/deepseek_v4/config.h"\n',
                        [(2, "(a:", "deepinfer/model/deepseek_v4/config.h")]),
    # A lower module's test helper is no exception for a module that model isn't below.
    "kv/bad_test.cc": ('#include "deepinfer/model/deepseek_v4/testing/flash_config.h"\n',
                       [(1, "(a:", "testing/flash_config.h")]),
    # A relative include that climbs into another module.
    "sched/bad_relative.cc": ('#include "../engine/engine.h"\n',
                              [(1, "(a:", "deepinfer/engine/engine.h")]),
    "recipe/bad_grammar.cc": ('#include "deepinfer/grammar/grammar.h"\n',
                              [(1, "(d:", "deepinfer/grammar/grammar.h")]),
    "engine/bad_backend.h": ('#include "deepinfer/backend/cpu/cpu_ops.h"\n',
                             [(1, "(b:", "deepinfer/backend/cpu/cpu_ops.h")]),
    "engine/bad_model.cc": ('\n#include "deepinfer/model/deepseek_v4/config.h"\n',
                            [(2, "(b:", "deepinfer/model/deepseek_v4/config.h")]),
    "sched/bad_cuda.cc": ('#include <vector>\n#include <cuda_runtime.h>\n',
                          [(2, "(c:", "cuda_runtime.h")]),
    "model/bad_cuda.h": ('#include <cooperative_groups.h>\n#include <cuda/barrier>\n'
                         '#include "deepinfer/backend/cuda/reduce.cuh"\n',
                         [(1, "(c:", "cooperative_groups.h"), (2, "(c:", "cuda/barrier"),
                          (3, "(c:", "deepinfer/backend/cuda/reduce.cuh")]),
    "backend/cpu/bad_cuda.cc": ('#include <cuda_bf16.h>\n', [(1, "(c:", "cuda_bf16.h")]),
    "runtime/cpu/bad_cuda.cc": ('#include <cublas_v2.h>\n', [(1, "(c:", "cublas_v2.h")]),
    "tensor/bad_upward.h": ('#include "deepinfer/loader/checkpoint.h"\n',
                            [(1, "(d:", "deepinfer/loader/checkpoint.h")]),
    "sched/bad_sideways.cc": ('#include "deepinfer/sample/sampler.h"\n',
                              [(1, "(d:", "deepinfer/sample/sampler.h")]),
    "server/bad_runtime.cc": ('#include "deepinfer/runtime/model_runner.h"\n',
                              [(1, "(d:", "deepinfer/runtime/model_runner.h")]),
    "router/bad_engine.cc": ('#include "deepinfer/server/http_server.h"\n',
                             [(1, "(d:", "deepinfer/server/http_server.h")]),
    "base/bad_any.h": ('#include "deepinfer/tensor/dtype.h"\n',
                       [(1, "(d:", "deepinfer/tensor/dtype.h")]),
    "nowhere/x.cc": ('#include "deepinfer/base/status.h"\n',
                     [(1, "(d:", "module nowhere is not in the layering table")]),
    # ... and so is a module it names that doesn't exist.
    "engine/bad_unknown.cc": ('#include "deepinfer/spec/mtp.h"\n',
                              [(1, "(d:", "deepinfer/spec/mtp.h")]),
}


def write_tree(root, files):
    for rel, content in files.items():
        path = os.path.join(root, "src", "deepinfer", rel)
        os.makedirs(os.path.dirname(path), exist_ok=True)
        with open(path, "w", encoding="utf-8") as f:
            f.write(content)


def self_test():
    failures = []
    with tempfile.TemporaryDirectory(prefix="layering_clean_") as root:
        write_tree(root, CLEAN_TREE)
        got = check_tree(root)
        for f, line, msg in got:
            failures.append("clean tree reported {}:{}: {}".format(f, line, msg))
        with contextlib.redirect_stdout(io.StringIO()), contextlib.redirect_stderr(io.StringIO()):
            rc = run(root)
        if rc != 0:
            failures.append("clean tree: non-zero exit")
    with tempfile.TemporaryDirectory(prefix="layering_bad_") as root:
        write_tree(root, CLEAN_TREE)
        write_tree(root, {rel: content for rel, (content, _) in VIOLATIONS.items()})
        got = check_tree(root)
        expected = 0
        for rel, (_, wants) in VIOLATIONS.items():
            shown = "src/deepinfer/" + rel
            for line, rule, needle in wants:
                expected += 1
                hits = [msg for f, ln, msg in got if f == shown and ln == line]
                if not any(rule in msg and needle in msg for msg in hits):
                    failures.append("{}:{}: expected a {} violation naming {}, got {}".format(
                        shown, line, rule, needle, hits or "nothing"))
        if len(got) != expected:
            failures.append("expected {} violations, got {}:\n  {}".format(
                expected, len(got), "\n  ".join("{}:{}: {}".format(*v) for v in got)))
        with contextlib.redirect_stdout(io.StringIO()), contextlib.redirect_stderr(io.StringIO()):
            rc = run(root)
        if rc == 0:
            failures.append("tree with violations: exit status 0")
    for f in failures:
        print("SELF-TEST FAILURE: " + f, file=sys.stderr)
    if failures:
        return 1
    print("layering self-test: clean tree passes; {} rule checks reported".format(
        sum(len(w) for _, w in VIOLATIONS.values())))
    return 0


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--root", default=os.path.normpath(
        os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..")),
                        help="repository root (holds src/deepinfer)")
    parser.add_argument("--self-test", action="store_true",
                        help="check the checker on generated trees")
    args = parser.parse_args()
    if args.self_test:
        return self_test()
    if not os.path.isdir(os.path.join(args.root, "src", "deepinfer")):
        print("no src/deepinfer under " + args.root, file=sys.stderr)
        return 2
    return run(args.root)


if __name__ == "__main__":
    sys.exit(main())
