# Sourced by CLI smoke tests: a temp dir $tmp removed on exit, the cache dir inside it (the
# embedded default model is made there, never in the user's cache), no local HF model dir, and
# fail MESSAGE.
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
export DEEPINFER_CACHE_DIR=$tmp/cache
unset DEEPINFER_HF_MODEL_DIR
fail() { echo "FAIL: $*" >&2; exit 1; }
