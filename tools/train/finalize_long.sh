#!/usr/bin/env bash
# Records a long-form model's PyTorch vanilla generations (blocks of 32, one token per step)
# on the first N test prompts of its split (default 204 = 41 per family, 40 swap; both splits
# are round-robin by family) for the engine's parity test (tests/engine/engine_test.cc,
# "<name>: greedy generations equal the PyTorch trainer's"), and rewrites models/SHA256SUMS.
# Each model reads the split of the suite it was trained on (tools/tasks/splits.py): the -long
# models suite v6 (tools/tasks/data_long), the -cot models suite v7 (tools/tasks/data_cot).
# Usage: tools/train/finalize_long.sh llada-long|dream-long|llada-cot|dream-cot [N]
#        (THREADS=2 by default)
set -euo pipefail
cd "$(dirname "$0")/../.."
name=${1:?usage: tools/train/finalize_long.sh llada-long|dream-long|llada-cot|dream-cot [N]}
n=${2:-204}
split=$(/usr/bin/python3 -m tools.tasks.splits "models/$name")
nice -n 5 /usr/bin/python3 -m tools.train.evaluate --model "models/$name" \
  --split "$split" --limit "$n" --threads "${THREADS:-2}" \
  --out "tools/train/out/${name}_test_generations.jsonl" \
  | tee "tools/train/out/${name}_test_summary.json"
tools/train/sha256sums.sh
