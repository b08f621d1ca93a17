#!/usr/bin/env bash
# Copies the latest weights of a running (or stopped) long-form training run into the committed
# warm-start folder, overwriting the previous snapshot (one folder per model, ~6 MB: bf16
# model.safetensors + config, tokenizer, generation_config, training_state with the step).
# A later session continues from it with train.py ... --warm-start tools/train/warm_start/NAME
# (see models/README.md, "Long-form models"). The best-by-validation model is in models/NAME.
#
# Usage: tools/train/snapshot_long.sh [NAME ...]     (default: llada-long dream-long)
#        NAME may also be llada-cot or dream-cot (tools/train/out_cot; snapshot_cot.sh).
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
names=("$@")
[ ${#names[@]} -eq 0 ] && names=(llada-long dream-long)
for name in "${names[@]}"; do
  case "$name" in
    *-cot) src="$here/out_cot/$name/latest" ;;  # suite v7 runs (train_cot.sh)
    *) src="$here/out_long/$name/latest" ;;
  esac
  if [ ! -f "$src/model.safetensors" ]; then
    echo "$name: no snapshot in $src (not started yet?)"
    continue
  fi
  dst="$here/warm_start/$name"
  tmp="$dst.tmp.$$"
  rm -rf "$tmp" && mkdir -p "$tmp"
  # Copy a consistent set: the trainer replaces the files of latest/ one by one.
  for attempt in 1 2 3; do
    cp "$src"/* "$tmp"/
    if cmp -s "$src/training_state.json" "$tmp/training_state.json" \
        && cmp -s "$src/model.safetensors" "$tmp/model.safetensors"; then
      break
    fi
    sleep 5
  done
  rm -rf "$dst" && mv "$tmp" "$dst"
  size=$(stat -c %s "$dst/model.safetensors")
  if [ "$size" -gt 20000000 ]; then
    echo "$name: model.safetensors is $size bytes (> 20 MB)" >&2
    exit 1
  fi
  step=$(python3 -c "import json,sys; print(json.load(open(sys.argv[1]))['step'])" \
    "$dst/training_state.json")
  echo "$name: step $step, $size bytes -> ${dst#$here/../../}"
done
