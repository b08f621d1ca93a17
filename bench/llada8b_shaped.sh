#!/usr/bin/env bash
# Real scale on a CPU machine: writes a LLaDA-8B-Instruct-shaped checkpoint folder (six
# shards, 16 GB of seeded random bf16 weights, the published names, shapes, index and
# config.json; bench/make_llada8b_shaped.py), builds dllm-load-bench and runs it: load time,
# RSS after load, one full and one partial step at L = 512 (bench/load_bench.cc).
#
# A bench, not a CI test: it needs ~16 GB of free disk and ~18 GB of free RAM, and a full
# 8B step at L = 512 takes minutes on one core. The folder is reused when it already has its
# index (delete it afterwards: `rm -rf DIR`).
#
# Usage: bench/llada8b_shaped.sh [DIR] [dllm-load-bench options...]
#   DIR defaults to /work/llada8b-shaped; options default to --length 512 --partial-rows 24
#   --threads 1. PYTHON selects the interpreter (needs numpy; no PyPI packages).
set -euo pipefail
cd "$(dirname "$0")/.."
DIR=${1:-/work/llada8b-shaped}
shift || true
ARGS=("$@")
[ ${#ARGS[@]} -gt 0 ] || ARGS=(--length 512 --partial-rows 24 --threads 1)

PYTHON=${PYTHON:-python3}
if ! "$PYTHON" -c 'import numpy' 2> /dev/null; then PYTHON=/usr/bin/python3; fi

if [ -f "$DIR/model.safetensors.index.json" ]; then
  echo "== reusing $DIR"
else
  echo "== writing $DIR ($(df -h --output=avail "$(dirname "$DIR")" | tail -1) free)"
  start=$(date +%s)
  nice -n 10 "$PYTHON" -m bench.make_llada8b_shaped "$DIR"  # a module: run from the repo root
  echo "== generation: $(($(date +%s) - start)) s"
fi

BUILD_DIR=${DLLM_BUILD_DIR:-build}
if [ ! -f "$BUILD_DIR/build.ninja" ]; then
  cmake -S . -B "$BUILD_DIR" -G Ninja -DCMAKE_BUILD_TYPE=${DLLM_BUILD_TYPE:-Release}
fi
cmake --build "$BUILD_DIR" -j "${DLLM_JOBS:-$(nproc)}" --target dllm-load-bench
echo "== free memory: $(free -g | awk '/^Mem:/ {print $7}') GB available"
"$BUILD_DIR/bin/dllm-load-bench" --model "$DIR" "${ARGS[@]}"
