#!/usr/bin/env bash
# Installs the peer for bench/tokenizer_bench: npm's `tokenizers` (HF's Rust library, Node
# binding) into bench/node_modules (git-ignored). The bench works without it and says so.
set -euo pipefail
cd "$(dirname "$0")"
npm install --no-save --no-package-lock --prefix . tokenizers@0.23.2
