#!/usr/bin/env bash
# make dist: the packages as they would be published, in dist/ — the sdist and
# the wheel of sandboxd (python -m build, each from the source tree) and the
# npm tarball of clients/typescript (npm pack). tests/ecosystem/test_dist.py
# checks them: metadata, the files each carries, the wheel rebuilt from the
# sdist, the wheel installed and used against a daemon.
set -euo pipefail
cd "$(dirname "$0")/.."
PY="${SANDBOXD_PYTHON:-.venv/bin/python}"
# A build/ left from an earlier build would put files that are gone into the wheel.
rm -rf dist build ./*.egg-info
"$PY" -m build --installer uv --sdist --wheel --outdir dist . >dist.log 2>&1 || { cat dist.log; exit 1; }
rm -rf build ./*.egg-info dist.log

cd clients/typescript
fail_or_skip() {
  if [[ "${CI:-}" == "true" ]]; then echo "[dist] FAIL: $1" >&2; exit 1; fi
  echo "[dist] no npm tarball: $1 (CI=true makes this a failure)" >&2; exit 0
}
# shellcheck source=scripts/lib/node.sh
source ../../scripts/lib/node.sh
ensure_node
npm pack --silent --pack-destination ../../dist >/dev/null
cd ../..
for file in dist/*; do
  printf '[dist] %-40s %8s bytes\n' "$file" "$(stat -c %s "$file")"
done
