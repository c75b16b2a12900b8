#!/usr/bin/env bash
# The TypeScript tier (clients/typescript): Node 22 from npm into a project
# folder, dependencies from the committed lock file, tsc, then node --test
# against real sandboxd daemons. Idempotent; quick when already set up.
# Under CI=true a missing Node or daemon FAILS the run; it never skips.
set -euo pipefail
cd "$(dirname "$0")/../clients/typescript"
fail_or_skip() {
  if [[ "${CI:-}" == "true" ]]; then echo "[ts-test] FAIL: $1" >&2; exit 1; fi
  echo "[ts-test] skipped: $1 (CI=true makes this a failure)" >&2; exit 0
}
# shellcheck source=scripts/lib/node.sh
source ../../scripts/lib/node.sh
ensure_node
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
