#!/usr/bin/env bash
# Evaluates the committed tiny models on the test split, writes their generations and
# models/SHA256SUMS. Run from anywhere: tools/train/finalize.sh
set -euo pipefail
cd "$(dirname "$0")/../.."
for name in llada-tiny dream-tiny; do
  nice -n 5 /usr/bin/python3 -m tools.train.evaluate --model "models/$name" \
    --split tools/tasks/data/test.jsonl --out "tools/train/out/${name}_test_generations.jsonl" \
    | tee "tools/train/out/${name}_test_summary.json"
done
tools/train/sha256sums.sh
cat models/SHA256SUMS
