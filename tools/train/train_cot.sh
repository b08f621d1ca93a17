#!/usr/bin/env bash
# Starts (or resumes) the suite-v7 ("cot", tools/tasks/cot.py) training runs in the
# background, niced, one thread each: from their checkpoints in $STATE_ROOT/<name>/ckpt.pt
# when present, else from the committed snapshots tools/train/warm_start/<name>, else (first
# start) from the long models' snapshots tools/train/warm_start/<long model>, or the shipped
# models/<long model> where no newer snapshot exists.
# Usage: tools/train/train_cot.sh [llada-cot] [dream-cot]   (default: both)
# Env:   STATE_ROOT (default tools/train/out_cot), OUT_ROOT (default $STATE_ROOT/models;
#        models/<name> once they ship): checkpoints and
#        the best-by-validation model folders. MIX (family weights, default uniform), SHOTS
#        (default 2,6), LR (default 6e-4), MAX_STEPS (where the cosine schedule ends and the
#        run stops; default llada-cot 64,500, dream-cot 37,000: the schedule first ran to
#        20,000 steps after the phase start and was shortened on 2026-12-03, at steps ~60,000
#        and ~32,600, to anneal within the CPU time left; keep it, or the rate jumps back up),
#        COSINE_FROM (where the schedule restarts; default: the step the long model was
#        snapshotted at, llada-long 52,642, dream-long 25,500), NICE (default 10).
# A later phase restarts the schedule from a shipped snapshot, e.g. llada-cot's add/sub phase
# (2026-12-03, docs/longform-history.md):
#   COSINE_FROM=64244 MAX_STEPS=67500 LR=3e-4 MIX=add=3,sub=3,reverse=1,copy=1,swap=1 \
#     tools/train/train_cot.sh llada-cot
# and dream-cot's (2026-12-04, from its shipped step 36,959; shipped at step 38,988):
#   COSINE_FROM=36959 MAX_STEPS=40200 LR=3e-4 MIX=add=3,sub=3,reverse=1,copy=1,swap=1 \
#     tools/train/train_cot.sh dream-cot
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
root="$(cd "$here/../.." && pwd)"
state_root=${STATE_ROOT:-$here/out_cot}
out_root=${OUT_ROOT:-$state_root/models}
names=("$@")
[ ${#names[@]} -eq 0 ] && names=(llada-cot dream-cot)
mkdir -p "$state_root"
for name in "${names[@]}"; do
  case "$name" in
    llada-cot) family=(--family llada --seed 2); from=52642; end=64500; src=llada-long ;;
    dream-cot) family=(--family dream --kv-heads 2 --seed 3); from=25500; end=37000; src=dream-long ;;
    *) echo "train_cot.sh: unknown model '$name' (llada-cot or dream-cot)" >&2; exit 2 ;;
  esac
  # The trainer runs as `python3 -m tools.train.train`; one started before that (as
  # `python3 train.py`) may still own the state dir.
  if pgrep -f "(train[.]py|tools[.]train[.]train) --tasks cot .*--state-dir $state_root/$name " \
      >/dev/null; then
    echo "$name: already running"
    continue
  fi
  if [ -f "$here/warm_start/$name/model.safetensors" ]; then
    start=(--warm-start "$here/warm_start/$name")
  else
    start=(--warm-start "$here/warm_start/$src")
    # No byte copy of a shipped model is kept: dream-long's snapshot is models/dream-long.
    [ -f "${start[1]}/model.safetensors" ] || start=(--warm-start "$here/../../models/$src")
  fi
  if [ ! -f "$state_root/$name/ckpt.pt" ] && [ ! -f "${start[1]}/model.safetensors" ]; then
    echo "$name: neither a checkpoint nor a warm-start snapshot; not started" >&2
    continue
  fi
  # A module of the package `tools`: the repo root on PYTHONPATH. The working directory stays
  # tools/train (relative paths in STATE_ROOT and OUT_ROOT resolve there, as they always did).
  (cd "$here" && PYTHONPATH="$root${PYTHONPATH:+:$PYTHONPATH}" nohup nice -n "${NICE:-10}" \
    /usr/bin/python3 -m tools.train.train --tasks cot "${family[@]}" \
    --state-dir "$state_root/$name" --out "$out_root/$name" \
    --gen-length 192 --block-length 32 --hidden 192 --layers 6 --heads 6 --intermediate 512 \
    --rope-theta 10000 --tok-vocab 512 --tok-corpus 2000 --batch 4 --lr "${LR:-6e-4}" \
    --warmup 1 --cosine-from "${COSINE_FROM:-$from}" --max-steps "${MAX_STEPS:-$end}" \
    --curriculum-steps 0 --shot-mask-prob 0.5 --block-mask-prob 0.5 \
    --family-weights "${MIX:-add=1,sub=1,reverse=1,copy=1,swap=1}" --shots "${SHOTS:-2,6}" \
    --val-items 10 --eval-batch 5 --eval-every 1000 --ckpt-minutes 5 --minutes 100000 \
    "${start[@]}" --resume >> "$state_root/$name.log" 2>&1 < /dev/null &)
  if [ -f "$state_root/$name/ckpt.pt" ]; then from_what="its checkpoint"; else from_what="${start[1]#$here/}"; fi
  echo "$name: started from $from_what, log $state_root/$name.log"
done
