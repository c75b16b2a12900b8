#!/usr/bin/env bash
# Host tools the test suite needs besides Docker: ripgrep, so the grep tool's
# two engines (rg and the pure-Python fallback) are compared on the host too;
# tmux, a real terminal for the `sandboxctl shell` test.
set -euo pipefail

log() { echo "[ensure-host-tools] $*" >&2; }

missing=()
command -v rg >/dev/null 2>&1 || missing+=(ripgrep)
command -v tmux >/dev/null 2>&1 || missing+=(tmux)
if [ "${#missing[@]}" -eq 0 ]; then
    exit 0
fi
if [ "$(id -u)" -ne 0 ] || ! command -v apt-get >/dev/null 2>&1; then
    log "missing: ${missing[*]}: install with your package manager"
    exit 1
fi
# shellcheck source=scripts/lib/apt.sh
. "$(dirname "${BASH_SOURCE[0]}")/lib/apt.sh"
apt_install "${missing[@]}"
