#!/usr/bin/env bash
# Snapshots the suite-v7 runs (train_cot.sh) into tools/train/warm_start/{llada-cot,dream-cot},
# from which train_cot.sh resumes in a fresh checkout. Usage: tools/train/snapshot_cot.sh [NAME ...]
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
[ $# -eq 0 ] && set -- llada-cot dream-cot
exec "$here/snapshot_long.sh" "$@"
