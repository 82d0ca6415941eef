#!/usr/bin/env python3
"""Writes the OpenAI fuzzer's two huge seeds (too big to commit) into the directory given:
the audit's 100k-deep array in a chat message (~200 KB) and 1M-deep array in a completions
field (~2 MB). scripts/run_fuzz.sh runs the fuzzer once over each."""
import pathlib
import sys

out = pathlib.Path(sys.argv[1])
out.mkdir(parents=True, exist_ok=True)
d = 100_000
(out / "deep_chat_message_100k").write_text(
    '{"messages":[{"role":"user","content":' + "[" * d + "]" * d + "}]}")
d = 1_000_000
(out / "deep_completions_field_1m").write_text(
    '{"prompt":"hi","max_tokens":' + "[" * d + "]" * d + "}")
