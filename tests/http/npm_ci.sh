#!/bin/sh
# Installs the pinned npm packages of tests/http (package-lock.json: the OpenAI Node SDK and
# playwright-core) when they are missing or older than the lock file. ctest runs it once as a fixture before the node tests.
set -eu
cd "$(dirname "$0")"
stamp=node_modules/.dllm-installed
if [ -f "$stamp" ] && [ "$stamp" -nt package-lock.json ] && [ -d node_modules/openai ] &&
  [ -d node_modules/playwright-core ]; then
  echo "tests/http: node_modules up to date"
  exit 0
fi
command -v npm >/dev/null || { echo "tests/http: npm not found (Node.js 20+ needed)" >&2; exit 1; }
npm ci --no-audit --no-fund --loglevel=error
touch "$stamp"
