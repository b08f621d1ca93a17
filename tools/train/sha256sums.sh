#!/usr/bin/env bash
# Rewrites models/SHA256SUMS over every file of every model folder in models/ (the tiny and,
# once committed, the long-form models); tools/train/test_tiny_models.py checks it.
set -euo pipefail
cd "$(dirname "$0")/../../models"
find . -mindepth 2 -type f -printf '%P\n' | LC_ALL=C sort | xargs sha256sum > SHA256SUMS
