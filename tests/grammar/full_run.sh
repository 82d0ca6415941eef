#!/usr/bin/env bash
# The full corpus setting on a many-core machine: one walker process per item, the items named
# in SPLIT ("id:parts ...") split into parts by --walk-range. Writes out.*.jsonl to WORKDIR;
# validate them here or elsewhere with check_corpus.py --validate-only --workdir WORKDIR.
#   tests/grammar/full_run.sh WORKDIR [walks] [max_tokens] [seed] [item_budget_s]
# e.g. SPLIT="ebnf/019_xml_like.json:16" tests/grammar/full_run.sh /tmp/corpus 1000 96 4 120
set -euo pipefail
cd "$(dirname "$0")/../.."
work=${1:?usage: full_run.sh WORKDIR [walks] [max_tokens] [seed] [item_budget_s]}
walks=${2:-1000} max_tokens=${3:-96} seed=${4:-4} budget=${5:-120}
walker=${WALKER:-build/tests/grammar/grammar_walk}
mkdir -p "$work"
if [ ! -f "$work/jobs.jsonl" ]; then
  /usr/bin/python3 tests/grammar/check_corpus.py --walker "$walker" \
    --tokenizer assets/tokenizers/deepseek_v3 --walks "$walks" --max-tokens "$max_tokens" \
    --seed "$seed" --workdir "$work" --prepare-only
fi
# One task line per process: "<item line number> <first walk> <last walk> <docs 0|1>".
tasks=$(python3 - "$work/jobs.jsonl" "$walks" "${SPLIT:-}" <<'PY'
import json, sys
jobs, walks, split = sys.argv[1], int(sys.argv[2]), dict(
    (s.rsplit(":", 1)[0], int(s.rsplit(":", 1)[1])) for s in sys.argv[3].split())
for n, line in enumerate(open(jobs, encoding="utf-8")):
    parts = split.get(json.loads(line)["id"], 1)
    for p in range(parts):
        a, b = walks * p // parts, walks * (p + 1) // parts
        print(n, a, b, 1 if p == 0 else 0, *(["split"] if parts > 1 else []))
PY
)
run_task() {
  local n=$1 a=$2 b=$3 docs=$4
  sed -n "$((n + 1))p" "$work/jobs.jsonl" > "$work/job.$n.$a"
  "$walker" --tokenizer assets/tokenizers/deepseek_v3 --jobs "$work/job.$n.$a" \
    --out "$work/out.$n.$a.jsonl" --walks "$walks" --seed "$seed" --max-tokens "$max_tokens" \
    --item-budget-s "$budget" --walk-range "$a:$b" --docs "$docs" || echo "FAIL item $n walks $a:$b"
  rm -f "$work/job.$n.$a"
}
export -f run_task
export work walker walks seed max_tokens budget
# Split items first: they are the slow ones.
{ grep split <<<"$tasks" || true; grep -v split <<<"$tasks" || true; } |
  xargs -P "$(nproc)" -L 1 bash -c 'run_task "$0" "$1" "$2" "$3"'
echo "wrote $(ls "$work"/out.*.jsonl | wc -l) output files to $work"
