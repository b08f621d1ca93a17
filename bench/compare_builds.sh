#!/usr/bin/env bash
# Side-by-side speed of two builds of dllm-bench on the same model, prompts and settings, in
# one run: builds REV (default: the parent of the first commit of the own-GEMM CPU backend,
# i.e. the OpenBLAS backend) in a scratch worktree, then alternates old/new runs and reports
# each setting's decode wall time (its own row's wall_s) and the ratio.
#
# Usage: bench/compare_builds.sh [--rev REV] [--model DIR] [--limit N] [--rounds N]
#                                [--policy SPEC]...
set -euo pipefail
cd "$(dirname "$0")/.."
REV=b8efb59~1 MODEL=models/llada-tiny LIMIT=200 ROUNDS=2 POLICIES=()
while (($#)); do
  case "$1" in
    --rev) REV=$2; shift 2 ;;
    --model) MODEL=$2; shift 2 ;;
    --limit) LIMIT=$2; shift 2 ;;
    --rounds) ROUNDS=$2; shift 2 ;;
    --policy) POLICIES+=("$2"); shift 2 ;;
    *) echo "usage: $0 [--rev REV] [--model DIR] [--limit N] [--rounds N] [--policy SPEC]..." >&2; exit 2 ;;
  esac
done
((${#POLICIES[@]})) || POLICIES=(none entropy:tau=0.5,k=4)
OLD_DIR=${DLLM_COMPARE_DIR:-build-compare}/$(git rev-parse --short "$REV")
if [ ! -x "$OLD_DIR/build/bin/dllm-bench" ]; then
  rm -rf "$OLD_DIR"; mkdir -p "$(dirname "$OLD_DIR")"
  git worktree add --detach "$OLD_DIR" "$REV" >/dev/null
  (cd "$OLD_DIR" && cmake -S . -B build -G Ninja -DCMAKE_BUILD_TYPE=Release -DDLLM_CUDA=OFF >/dev/null &&
   cmake --build build --target dllm-bench >/dev/null)
fi
[ -f "${DLLM_BUILD_DIR:-build}/build.ninja" ] || scripts/build >/dev/null
cmake --build "${DLLM_BUILD_DIR:-build}" --target dllm-bench >/dev/null
TASKS=tools/tasks/data/test.jsonl
echo "model $MODEL, $LIMIT prompts, 1 thread; old = $REV, new = $(git rev-parse --short HEAD)"
# The time of a setting is its own row's wall_s (the decode loop of that setting alone): the
# process CPU time would also count load, warm-up and, in newer builds, the vanilla baseline
# row that dllm-bench always measures first. Rounds alternate old/new so that load from
# other jobs hits both alike.
printf "%-28s %12s %12s %8s %9s %9s\n" policy old_wall_s new_wall_s speedup old_acc new_acc
for policy in "${POLICIES[@]}"; do
  old_t=0 new_t=0
  for ((r = 0; r < ROUNDS; ++r)); do
    for which in old new; do
      bin=${DLLM_BUILD_DIR:-build}/bin/dllm-bench; [ $which = old ] && bin=$OLD_DIR/build/bin/dllm-bench
      row=$("$bin" --model "$MODEL" --tasks "$TASKS" --policy "$policy" --limit "$LIMIT" \
              --threads 1 2>/dev/null | grep -v '"baseline"' | grep "\"policy\":\"${policy%%:*}\"" | tail -1)
      t=$(grep -o '"wall_s":[0-9.]*' <<<"$row" | cut -d: -f2)
      acc=$(grep -o '"accuracy":[0-9.]*' <<<"$row" | cut -d: -f2)
      if [ $which = old ]; then old_t=$(awk -v a="$old_t" -v b="$t" 'BEGIN {print a + b}'); old_acc=$acc; else
        new_t=$(awk -v a="$new_t" -v b="$t" 'BEGIN {print a + b}'); new_acc=$acc; fi
    done
  done
  printf "%-28s %12.2f %12.2f %8.2f %9s %9s\n" "$policy" "$old_t" "$new_t" \
    "$(awk -v a="$old_t" -v b="$new_t" 'BEGIN {print a / b}')" "$old_acc" "$new_acc"
done
echo "speedup: old wall seconds / new wall seconds of the setting's row (sum of $ROUNDS rounds)"
