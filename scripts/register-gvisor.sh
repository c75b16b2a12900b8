#!/usr/bin/env bash
# Optional: install gVisor (Debian package `runsc`) and register it with Docker
# as runtime "runsc" (runtimeArgs --platform=ptrace --network=none), merged into
# /etc/docker/daemon.json.  Exits 0 with a note if runsc is not installable.
#
# If dockerd is already running and the config changed, it is sent SIGHUP
# (runtimes are reloaded live).
#
# Environment:
#   SANDBOXD_DOCKER_DAEMON_JSON  config path (default /etc/docker/daemon.json)
set -euo pipefail

log() { echo "[register-gvisor] $*" >&2; }
die() { echo "[register-gvisor] ERROR: $*" >&2; exit 1; }

DAEMON_JSON="${SANDBOXD_DOCKER_DAEMON_JSON:-/etc/docker/daemon.json}"
RUNTIME_NAME=runsc

[ "$(id -u)" -eq 0 ] || die "must run as root (installs a package and edits $DAEMON_JSON)"

# ---- install runsc ----------------------------------------------------------
apt_candidate() {
    apt-cache policy "$1" 2>/dev/null | awk '/Candidate:/ {print $2; exit}'
}

if ! command -v runsc >/dev/null 2>&1; then
    if ! command -v apt-get >/dev/null 2>&1; then
        log "note: runsc is not installed and apt-get is unavailable; skipping gVisor"
        exit 0
    fi
    cand="$(apt_candidate runsc)"
    if [ -z "$cand" ] || [ "$cand" = "(none)" ]; then
        log "apt-get update"
        apt-get update -q || true
        cand="$(apt_candidate runsc)"
    fi
    if [ -z "$cand" ] || [ "$cand" = "(none)" ]; then
        log "note: package runsc is not available from the configured apt sources; skipping gVisor"
        exit 0
    fi
    log "apt-get install -y runsc ($cand)"
    DEBIAN_FRONTEND=noninteractive apt-get install -y -q --no-install-recommends runsc
fi
RUNSC_PATH="$(command -v runsc)"
log "runsc: $RUNSC_PATH ($("$RUNSC_PATH" --version 2>/dev/null | head -n1 || echo 'version unknown'))"

# ---- merge into daemon.json -------------------------------------------------
PY=/usr/bin/python3
[ -x "$PY" ] || PY="$(command -v python3 || true)"
[ -n "$PY" ] || die "python3 is needed to edit $DAEMON_JSON"

mkdir -p "$(dirname "$DAEMON_JSON")"
set +e
"$PY" - "$DAEMON_JSON" "$RUNTIME_NAME" "$RUNSC_PATH" <<'PYEOF'
import json, os, sys, tempfile

path, name, binary = sys.argv[1:4]
want = {"path": binary, "runtimeArgs": ["--platform=ptrace", "--network=none"]}

cfg = {}
if os.path.exists(path):
    with open(path) as f:
        text = f.read()
    if text.strip():
        try:
            cfg = json.loads(text)
        except ValueError as e:
            sys.stderr.write(f"[register-gvisor] ERROR: {path} is not valid JSON: {e}\n")
            sys.exit(2)
    if not isinstance(cfg, dict):
        sys.stderr.write(f"[register-gvisor] ERROR: {path} is not a JSON object\n")
        sys.exit(2)

runtimes = cfg.setdefault("runtimes", {})
if runtimes.get(name) == want:
    sys.exit(10)  # unchanged
runtimes[name] = want

d = os.path.dirname(os.path.abspath(path))
fd, tmp = tempfile.mkstemp(dir=d, prefix=".daemon.json.")
with os.fdopen(fd, "w") as f:
    json.dump(cfg, f, indent=2, sort_keys=True)
    f.write("\n")
os.chmod(tmp, 0o644)
os.replace(tmp, path)
PYEOF
rc=$?
set -e
case "$rc" in
    0) changed=1; log "registered runtime '$RUNTIME_NAME' in $DAEMON_JSON" ;;
    10) changed=0; log "runtime '$RUNTIME_NAME' already registered in $DAEMON_JSON" ;;
    *) die "could not update $DAEMON_JSON" ;;
esac

# ---- tell a running dockerd --------------------------------------------------
pid=""
if [ -f /var/run/docker.pid ]; then
    pid="$(tr -dc '0-9' </var/run/docker.pid 2>/dev/null || true)"
    [ -n "$pid" ] && [ "$(cat "/proc/$pid/comm" 2>/dev/null)" = "dockerd" ] || pid=""
fi
[ -n "$pid" ] || pid="$(pgrep -x dockerd 2>/dev/null | head -n1 || true)"

if [ -z "$pid" ]; then
    log "dockerd is not running; it will pick up the runtime when started"
    exit 0
fi
if [ "$changed" = "1" ]; then
    log "sending SIGHUP to dockerd (pid $pid) to reload $DAEMON_JSON"
    kill -HUP "$pid"
fi
# confirm the daemon knows the runtime (the reload is asynchronous)
for _ in 1 2 3 4 5 6 7 8 9 10; do
    if docker info --format '{{range $k, $v := .Runtimes}}{{$k}} {{end}}' 2>/dev/null | tr ' ' '\n' | grep -qx "$RUNTIME_NAME"; then
        log "dockerd lists runtime '$RUNTIME_NAME'; use: docker run --runtime=$RUNTIME_NAME ..."
        exit 0
    fi
    sleep 0.5
done
log "dockerd does not list runtime '$RUNTIME_NAME' yet; restart dockerd to load $DAEMON_JSON"
