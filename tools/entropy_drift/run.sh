#!/usr/bin/env bash
# Reproduces docs/entropy-drift.md: does the entropy of the tokens committed at step t
# (EntropyCache's E) predict the K/V drift and output change of a cached step t+1?
#
# Usage: tools/entropy_drift/run.sh [BUILD_BIN_DIR] [OUT_DIR] [TASK_LIMIT]
# (defaults: build/bin, docs/results/entropy-drift, 300). Needs dllm-bench, python3 and gnuplot.
#
# Setting: policy interval:n=2 makes every even step full and every odd step partial, so each
# partial step t+1 reads a cache that was exact at step t; its drift is caused by step t's
# commits alone, and E_t spans its whole range (an entropy policy would only ever allow
# partial steps after E <= tau). Every partial step is shadowed (--shadow 1). A second run
# with the entropy policy at tau = +inf (never refresh after the first step) shows how drift
# accumulates instead.
set -euo pipefail
cd "$(dirname "$0")/../.."
BIN=${1:-build/bin}
OUT=${2:-docs/results/entropy-drift}
LIMIT=${3:-300}
mkdir -p "$OUT"
for model in llada-tiny dream-tiny; do
  for policy in interval:n=2,k=2 entropy:tau=inf,k=2; do
    tag="$model-${policy%%:*}"
    "$BIN/dllm-bench" --model "models/$model" --tasks tools/tasks/data/test.jsonl \
      --limit "$LIMIT" --threads 1 --policy "$policy" --shadow 1 \
      --shadow-out "$OUT/$tag.csv" > "$OUT/$tag.jsonl"
    # Keep only the shadowed setting's samples (the `none` baseline has no partial steps).
  done
done
python3 tools/entropy_drift/analyze.py "$OUT"/*-interval.csv "$OUT"/*-entropy.csv \
  --out "$OUT/scatter" | tee "$OUT/correlation.md"
gnuplot <<GP
set terminal pngcairo size 1200,500 noenhanced
set output '$OUT/entropy-drift.png'
set multiplot layout 1,2
set logscale xy
set format x '%.0e'
set xrange [1e-9:2]
set xlabel 'E_t: max entropy of the tokens committed at step t (nats, log)'
set ylabel 'K/V drift at t+1 (old decoded tokens, rel. L2)'
set title 'K/V drift after one partial step (interval n=2)'
plot '$OUT/scatter_llada-tiny-interval_drift_decoded_old.dat' using 1:2 with points pt 7 ps 0.4 title 'llada-tiny', \
     '$OUT/scatter_dream-tiny-interval_drift_decoded_old.dat' using 1:2 with points pt 7 ps 0.4 title 'dream-tiny'
set ylabel 'KL(full || partial) at step t+1 (nats)'
set title 'Output change after one partial step (interval n=2)'
plot '$OUT/scatter_llada-tiny-interval_kl_mean.dat' using 1:(\$2 > 0 ? \$2 : 1e-12) with points pt 7 ps 0.4 title 'llada-tiny', \
     '$OUT/scatter_dream-tiny-interval_kl_mean.dat' using 1:(\$2 > 0 ? \$2 : 1e-12) with points pt 7 ps 0.4 title 'dream-tiny'
unset multiplot
GP
echo "wrote $OUT/correlation.md and $OUT/entropy-drift.png"
