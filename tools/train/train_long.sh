#!/usr/bin/env bash
# Starts (or resumes) the long-form training runs in the background, niced, one thread each:
# from their checkpoints in $STATE_ROOT/<name>/ckpt.pt when present, else from the committed
# snapshots in tools/train/warm_start/<name> (models/README.md, "Long-form models").
# Usage: tools/train/train_long.sh [llada-long] [dream-long]   (default: both)
# Env:   STATE_ROOT (default tools/train/out_long), OUT_ROOT (default models): where the
#        checkpoints and the best-by-validation model folders go.
#        MIX (family weights, default add=2,sub=2,reverse=0.5,swap=1.5, others 1) and
#        SHOTS (few-shot range, default 2,6): the data of the runs this call starts, e.g. a
#        drill of the families a model has not learned yet (models/README.md). MAX_STEPS (default 60000): where the cosine
#        learning-rate schedule ends and the run stops; a lower value anneals sooner.
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
root="$(cd "$here/../.." && pwd)"
state_root=${STATE_ROOT:-$here/out_long}
out_root=${OUT_ROOT:-$here/../../models}
names=("$@")
[ ${#names[@]} -eq 0 ] && names=(llada-long dream-long)
mkdir -p "$state_root"
for name in "${names[@]}"; do
  case "$name" in
    llada-long) family=(--family llada --seed 2) ;;
    dream-long) family=(--family dream --kv-heads 2 --seed 3) ;;
    *) echo "train_long.sh: unknown model '$name' (llada-long or dream-long)" >&2; exit 2 ;;
  esac
  # The trainer runs as `python3 -m tools.train.train`; one started before that (as
  # `python3 train.py`) may still own the state dir.
  if pgrep -f "(train[.]py|tools[.]train[.]train) --tasks long .*--state-dir $state_root/$name " \
      >/dev/null; then
    echo "$name: already running"
    continue
  fi
  # The newest snapshot: warm_start/<name> when it differs from the shipped model, else the
  # shipped model itself (models/<name>; no byte copy is kept).
  snapshot="$here/warm_start/$name"
  [ -f "$snapshot/model.safetensors" ] || snapshot="$here/../../models/$name"
  start=(--warm-start "$snapshot")
  if [ ! -f "$state_root/$name/ckpt.pt" ] && [ ! -f "$snapshot/model.safetensors" ]; then
    echo "$name: neither a checkpoint nor a warm-start snapshot; not started" >&2
    continue
  fi
  # A module of the package `tools`: the repo root on PYTHONPATH. The working directory stays
  # tools/train (relative paths in STATE_ROOT and OUT_ROOT resolve there, as they always did).
  (cd "$here" && PYTHONPATH="$root${PYTHONPATH:+:$PYTHONPATH}" nohup nice -n 10 \
    /usr/bin/python3 -m tools.train.train --tasks long "${family[@]}" \
    --state-dir "$state_root/$name" --out "$out_root/$name" \
    --gen-length 192 --block-length 32 --hidden 192 --layers 6 --heads 6 --intermediate 512 \
    --rope-theta 10000 --tok-vocab 512 --tok-corpus 2000 --batch 4 --lr 8e-4 --warmup 500 \
    --max-steps "${MAX_STEPS:-60000}" --curriculum-steps 2500 --shot-mask-prob 0.5 --block-mask-prob 0.5 \
    --family-weights "${MIX:-add=2,sub=2,reverse=0.5,swap=1.5}" --shots "${SHOTS:-2,6}" \
    --val-items 15 --eval-batch 3 --eval-every 1500 --ckpt-minutes 5 --minutes 100000 \
    "${start[@]}" --resume >> "$state_root/$name.log" 2>&1 < /dev/null &)
  echo "$name: started, log $state_root/$name.log"
done
