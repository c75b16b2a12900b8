#!/usr/bin/env bash
# Host tools the test suite needs besides Docker: ripgrep (the grep tool's two
# engines are compared on the host too), docker-compose (the example
# deploy/compose.yaml is checked by the real tool) and tmux (a real terminal
# for the `sandboxctl shell` test) and chromium (a real browser loads a
# sandbox's page and its WebSocket through a preview URL). Idempotent.
set -euo pipefail

log() { echo "[ensure-host-tools] $*" >&2; }

# command -> Debian package
declare -A TOOLS=([rg]=ripgrep [docker-compose]=docker-compose [tmux]=tmux [chromium]=chromium)

missing=()
for cmd in "${!TOOLS[@]}"; do
    command -v "$cmd" >/dev/null 2>&1 || missing+=("${TOOLS[$cmd]}")
done
[ "${#missing[@]}" -eq 0 ] && exit 0
if [ "$(id -u)" -ne 0 ] || ! command -v apt-get >/dev/null 2>&1; then
    log "missing host tools: ${missing[*]}: install them with your package manager"
    exit 1
fi
# shellcheck source=scripts/lib/apt.sh
. "$(dirname "${BASH_SOURCE[0]}")/lib/apt.sh"
apt_install "${missing[@]}"
