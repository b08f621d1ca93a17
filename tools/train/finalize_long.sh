#!/usr/bin/env bash
# Records a long-form model's PyTorch vanilla generations (blocks of 32, one token per step)
# on the first N test prompts (default 204 = 41 per family, 40 swap; the split is round-robin by
# family) for the engine's parity test (tests/engine/engine_test.cc, "<name>: greedy
# generations equal the PyTorch trainer's"), and rewrites models/SHA256SUMS.
# Usage: tools/train/finalize_long.sh llada-long|dream-long [N]   (THREADS=2 by default)
set -euo pipefail
cd "$(dirname "$0")/../.."
name=${1:?usage: tools/train/finalize_long.sh llada-long|dream-long [N]}
n=${2:-204}
nice -n 5 /usr/bin/python3 -m tools.train.evaluate --model "models/$name" \
  --split tools/tasks/data_long/test.jsonl --limit "$n" --threads "${THREADS:-2}" \
  --out "tools/train/out/${name}_test_generations.jsonl" \
  | tee "tools/train/out/${name}_test_summary.json"
tools/train/sha256sums.sh
