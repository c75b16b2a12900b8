#!/usr/bin/env bash
# Make sure a Docker engine answers `docker info`.
#
#   - already answering            -> exit 0 immediately (registering runsc if asked)
#   - dockerd missing, root+Debian -> apt-get install docker.io
#   - start dockerd detached (survives the calling make), wait for it
#
# Environment:
#   SANDBOXD_GVISOR=1          also register gVisor (runsc) before starting dockerd
#   SANDBOXD_DOCKER_WAIT=60    seconds to wait for the engine to answer
#   SANDBOXD_DOCKERD_LOG=...   dockerd log file (default /var/log/sandboxd-dockerd.log)
set -euo pipefail

log() { echo "[ensure-docker] $*" >&2; }
die() { echo "[ensure-docker] ERROR: $*" >&2; exit 1; }

SCRIPT_DIR="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
WAIT_SECS="${SANDBOXD_DOCKER_WAIT:-60}"
DOCKERD_LOG="${SANDBOXD_DOCKERD_LOG:-/var/log/sandboxd-dockerd.log}"
PIDFILE=/var/run/docker.pid

engine_up() {
    command -v docker >/dev/null 2>&1 || return 1
    timeout 15 docker info >/dev/null 2>&1
}

# ---- fast path --------------------------------------------------------------
if engine_up; then
    # A running engine may lack gVisor or carry an old runsc: register-gvisor.sh
    # is idempotent (cached binary, SIGHUP only when daemon.json changes).
    if [ "${SANDBOXD_GVISOR:-0}" = "1" ]; then
        "$SCRIPT_DIR/register-gvisor.sh" || log "gVisor registration failed; continuing without runsc"
    fi
    exit 0
fi

is_root() { [ "$(id -u)" -eq 0 ]; }
is_debian() { [ -f /etc/debian_version ] && command -v apt-get >/dev/null 2>&1; }

# shellcheck source=scripts/lib/apt.sh
. "$(dirname "${BASH_SOURCE[0]}")/lib/apt.sh"

# ---- make sure dockerd (and a client) exist ---------------------------------
if ! command -v dockerd >/dev/null 2>&1; then
    if ! is_root; then
        die "no Docker engine answers and dockerd is not installed; run as root (or install Docker yourself)"
    fi
    if ! is_debian; then
        die "no Docker engine answers and dockerd is not installed; automatic install only supported on Debian/Ubuntu (apt-get)"
    fi
    log "dockerd not found: installing Debian's docker.io"
    apt_install docker.io
    command -v dockerd >/dev/null 2>&1 || die "docker.io installed but dockerd is still not on PATH"
fi
command -v docker >/dev/null 2>&1 || die "dockerd is present but no docker client is on PATH"

# ---- optional: gVisor runtime ------------------------------------------------
if [ "${SANDBOXD_GVISOR:-0}" = "1" ]; then
    log "SANDBOXD_GVISOR=1: registering runsc runtime"
    "$SCRIPT_DIR/register-gvisor.sh" || log "warning: register-gvisor.sh failed; continuing without runsc"
fi

# ---- is a dockerd already running (just slow / starting)? -------------------
pid_is_dockerd() {
    local pid="$1"
    [ -n "$pid" ] && [ -d "/proc/$pid" ] && [ "$(cat "/proc/$pid/comm" 2>/dev/null)" = "dockerd" ]
}

running_pid=""
if [ -f "$PIDFILE" ]; then
    oldpid="$(tr -dc '0-9' <"$PIDFILE" 2>/dev/null || true)"
    if pid_is_dockerd "$oldpid"; then
        running_pid="$oldpid"
    else
        log "removing stale $PIDFILE (pid '${oldpid}' is not a running dockerd)"
        rm -f "$PIDFILE"
    fi
fi
if [ -z "$running_pid" ]; then
    running_pid="$(pgrep -x dockerd 2>/dev/null | head -n1 || true)"
fi

# ---- start dockerd ----------------------------------------------------------
if [ -n "$running_pid" ]; then
    log "dockerd already running (pid $running_pid); waiting for it to answer"
else
    is_root || die "dockerd is installed but not running, and starting it needs root"
    log "starting dockerd (log: $DOCKERD_LOG)"
    mkdir -p "$(dirname "$DOCKERD_LOG")"
    # setsid + nohup: own session, so it survives the calling make / shell.
    nohup setsid dockerd >>"$DOCKERD_LOG" 2>&1 </dev/null &
    running_pid=$!
    disown "$running_pid" 2>/dev/null || true
fi

# ---- wait for the engine ----------------------------------------------------
deadline=$(( $(date +%s) + WAIT_SECS ))
while :; do
    if engine_up; then
        ver="$(docker version --format '{{.Server.Version}}' 2>/dev/null || echo '?')"
        log "Docker engine is up (server $ver)"
        exit 0
    fi
    if ! [ -d "/proc/$running_pid" ] && ! pgrep -x dockerd >/dev/null 2>&1; then
        log "dockerd exited; last lines of $DOCKERD_LOG:"
        tail -n 30 "$DOCKERD_LOG" >&2 2>/dev/null || true
        die "dockerd failed to start"
    fi
    if [ "$(date +%s)" -ge "$deadline" ]; then
        log "last lines of $DOCKERD_LOG:"
        tail -n 30 "$DOCKERD_LOG" >&2 2>/dev/null || true
        die "Docker engine did not answer within ${WAIT_SECS}s"
    fi
    sleep 1
done
