#!/usr/bin/env bash
# Host tools the test suite needs besides Docker: ripgrep, so the grep tool's
# two engines (rg and the pure-Python fallback) are compared on the host too.
set -euo pipefail

log() { echo "[ensure-host-tools] $*" >&2; }

if command -v rg >/dev/null 2>&1; then
    exit 0
fi
if [ "$(id -u)" -ne 0 ] || ! command -v apt-get >/dev/null 2>&1; then
    log "ripgrep (rg) is missing: install it with your package manager"
    exit 1
fi
# shellcheck source=scripts/lib/apt.sh
. "$(dirname "${BASH_SOURCE[0]}")/lib/apt.sh"
apt_install ripgrep
