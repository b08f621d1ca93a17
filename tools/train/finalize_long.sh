#!/usr/bin/env bash
# Records a long-form model's PyTorch vanilla generations (blocks of 32, one token per step)
# on the first N test prompts of its split (default 204 = 41 per family, 40 swap; both splits
# are round-robin by family) for the engine's parity test (tests/engine/engine_test.cc,
# "<name>: greedy generations equal the PyTorch trainer's"), and rewrites models/SHA256SUMS.
# The -long models read the suite-v6 split (tools/tasks/data_long), the -cot models the
# suite-v7 one (tools/tasks/data_cot).
# Usage: tools/train/finalize_long.sh llada-long|dream-long|llada-cot|dream-cot [N]
#        (THREADS=2 by default)
set -euo pipefail
cd "$(dirname "$0")/../.."
name=${1:?usage: tools/train/finalize_long.sh llada-long|dream-long|llada-cot|dream-cot [N]}
n=${2:-204}
case "$name" in
  *-long) split=tools/tasks/data_long/test.jsonl ;;
  *-cot) split=tools/tasks/data_cot/test.jsonl ;;
  *) echo "finalize_long.sh: unknown model '$name'" >&2; exit 2 ;;
esac
nice -n 5 /usr/bin/python3 -m tools.train.evaluate --model "models/$name" \
  --split "$split" --limit "$n" --threads "${THREADS:-2}" \
  --out "tools/train/out/${name}_test_generations.jsonl" \
  | tee "tools/train/out/${name}_test_summary.json"
tools/train/sha256sums.sh
