#!/usr/bin/env bash
# Install gVisor's runsc and register it with Docker as runtime "runsc"
# (runtimeArgs --platform=$PLATFORM --network=none), merged into
# /etc/docker/daemon.json.  Exits 0 with a note if no runsc is installable.
#
# Which runsc: Debian 12's own package (0.0~20221219) rejects AT_NO_AUTOMOUNT in
# statx and fstatat, so coreutils' `ls -l`, `stat`, `cp -a` fail with EINVAL
# inside the sandbox.  We therefore take the runsc of a newer Debian suite
# ($SANDBOXD_GVISOR_SUITE, default trixie) through apt itself: a private apt
# state directory (the host's sources, pins and package set are untouched), the
# suite's signed index checked against the Debian archive keyring, `apt-get
# download` of the one package (a static Go binary, no dependencies), unpacked
# with dpkg-deb into $GVISOR_DIR/<version>/runsc.  That path is versioned so a
# later upgrade never swaps the binary under containers that are running; once
# there, later runs use it without touching the network.  If the suite cannot be
# reached, the host's own runsc package is the fallback (with a warning).
#
# If dockerd is already running and the config changed, it is sent SIGHUP
# (runtimes are reloaded live; running containers keep their runtime binary).
#
# Environment:
#   SANDBOXD_DOCKER_DAEMON_JSON  config path (default /etc/docker/daemon.json)
#   SANDBOXD_GVISOR_SUITE        Debian suite to take runsc from (default trixie;
#                                "host" = only the host's configured sources)
#   SANDBOXD_GVISOR_PLATFORM     runsc --platform (default ptrace)
#   SANDBOXD_GVISOR_DIR          install dir (default /usr/local/lib/sandboxd/gvisor)
set -euo pipefail

log() { echo "[register-gvisor] $*" >&2; }
# shellcheck source=scripts/lib/apt.sh
. "$(dirname "${BASH_SOURCE[0]}")/lib/apt.sh"
die() { echo "[register-gvisor] ERROR: $*" >&2; exit 1; }

DAEMON_JSON="${SANDBOXD_DOCKER_DAEMON_JSON:-/etc/docker/daemon.json}"
SUITE="${SANDBOXD_GVISOR_SUITE:-trixie}"
PLATFORM="${SANDBOXD_GVISOR_PLATFORM:-ptrace}"
GVISOR_DIR="${SANDBOXD_GVISOR_DIR:-/usr/local/lib/sandboxd/gvisor}"
RUNTIME_NAME=runsc
# The oldest runsc whose statx/fstatat accept AT_NO_AUTOMOUNT that we have tried.
MIN_VERSION="0.0~20240729"

[ "$(id -u)" -eq 0 ] || die "must run as root (installs runsc and edits $DAEMON_JSON)"

runsc_version() { "$1" --version 2>/dev/null | awk '/runsc version/ {print $3; exit}'; }
new_enough() { [ -n "$1" ] && dpkg --compare-versions "$1" ge "$MIN_VERSION"; }

# ---- 1. a runsc that is new enough, already unpacked ------------------------
RUNSC_PATH=""
best=""
for candidate in "$GVISOR_DIR"/*/runsc; do
    [ -x "$candidate" ] || continue
    v="$(runsc_version "$candidate")"
    new_enough "$v" || continue
    if [ -z "$best" ] || dpkg --compare-versions "$v" gt "$best"; then
        best="$v"
        RUNSC_PATH="$candidate"
    fi
done

# ---- 2. fetch one from the newer suite (private apt state) ------------------
fetch_from_suite() {
    local work sources opts version deb mirror
    command -v apt-get >/dev/null 2>&1 || return 1
    work="$(mktemp -d)"
    # shellcheck disable=SC2064
    trap "rm -rf '$work'" RETURN
    mkdir -p "$work/lists/partial" "$work/archives/partial" "$work/dl"
    sources="$work/sources.list"
    # The host's own Debian mirror, asked for the newer suite.
    mirror="$(pick_mirror "$SUITE")" || { log "no Debian mirror in the host's apt sources"; return 1; }
    echo "deb [signed-by=/usr/share/keyrings/debian-archive-keyring.gpg] $mirror $SUITE main" >"$sources"
    opts=(-o "Dir::Etc::SourceList=$sources" -o "Dir::Etc::SourceParts=/dev/null"
        -o "Dir::Etc::Preferences=/dev/null" -o "Dir::Etc::PreferencesParts=/dev/null"
        -o "Dir::State::Lists=$work/lists" -o "Dir::Cache::Archives=$work/archives"
        -o "Dir::Cache::pkgcache=" -o "Dir::Cache::srcpkgcache=" -o "APT::Sandbox::User=root")
    log "apt-get update (private state, suite $SUITE)"
    apt-get "${opts[@]}" -q update >&2 || return 1
    version="$(apt-cache "${opts[@]}" show runsc 2>/dev/null | awk '/^Version:/ {print $2}' | sort -V | tail -n1)"
    [ -n "$version" ] || { log "suite $SUITE has no runsc"; return 1; }
    log "apt-get download runsc=$version (from $SUITE)"
    (cd "$work/dl" && apt-get "${opts[@]}" -q download "runsc=$version" >&2) || return 1
    deb="$(ls "$work"/dl/runsc_*.deb 2>/dev/null | head -n1)"
    [ -n "$deb" ] || return 1
    dpkg-deb -x "$deb" "$work/x" || return 1
    [ -x "$work/x/usr/bin/runsc" ] || return 1
    version="$(runsc_version "$work/x/usr/bin/runsc")"
    new_enough "$version" || { log "runsc $version from $SUITE is older than $MIN_VERSION"; return 1; }
    mkdir -p "$GVISOR_DIR/$version"
    install -m 0755 "$work/x/usr/bin/runsc" "$GVISOR_DIR/$version/runsc.new"
    mv -f "$GVISOR_DIR/$version/runsc.new" "$GVISOR_DIR/$version/runsc"
    echo "$GVISOR_DIR/$version/runsc"
}

if [ -z "$RUNSC_PATH" ] && [ "$SUITE" != "host" ]; then
    RUNSC_PATH="$(fetch_from_suite || true)"
    [ -n "$RUNSC_PATH" ] || log "warning: could not fetch runsc from Debian $SUITE"
fi

# ---- 3. fallback: the host's own package -------------------------------------
if [ -z "$RUNSC_PATH" ]; then
    if ! command -v runsc >/dev/null 2>&1; then
        if ! command -v apt-get >/dev/null 2>&1; then
            log "note: runsc is not installed and apt-get is unavailable; skipping gVisor"
            exit 0
        fi
        # shellcheck source=scripts/lib/apt.sh
        . "$(dirname "${BASH_SOURCE[0]}")/lib/apt.sh"
        if ! apt_has_candidate runsc; then
            apt-get update -q >&2 || true
        fi
        if ! apt_has_candidate runsc; then
            log "note: package runsc is not available from the configured apt sources; skipping gVisor"
            exit 0
        fi
        apt_install runsc
    fi
    RUNSC_PATH="$(command -v runsc)"
    v="$(runsc_version "$RUNSC_PATH")"
    new_enough "$v" || log "warning: runsc $v is older than $MIN_VERSION: ls -l, stat, cp -a fail under it (statx EINVAL)"
fi
log "runsc: $RUNSC_PATH ($(runsc_version "$RUNSC_PATH" || echo 'version unknown'), platform $PLATFORM)"

# ---- merge into daemon.json -------------------------------------------------
PY=/usr/bin/python3
[ -x "$PY" ] || PY="$(command -v python3 || true)"
[ -n "$PY" ] || die "python3 is needed to edit $DAEMON_JSON"

mkdir -p "$(dirname "$DAEMON_JSON")"
set +e
"$PY" - "$DAEMON_JSON" "$RUNTIME_NAME" "$RUNSC_PATH" "$PLATFORM" <<'PYEOF'
import json, os, sys, tempfile

path, name, binary, platform = sys.argv[1:5]
want = {"path": binary, "runtimeArgs": [f"--platform={platform}", "--network=none"]}

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
    0) changed=1; log "registered runtime '$RUNTIME_NAME' ($RUNSC_PATH) in $DAEMON_JSON" ;;
    10) changed=0; log "runtime '$RUNTIME_NAME' already registered as $RUNSC_PATH in $DAEMON_JSON" ;;
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
# confirm the daemon knows the runtime at that path (the reload is asynchronous)
for _ in 1 2 3 4 5 6 7 8 9 10; do
    if docker info --format '{{json .Runtimes}}' 2>/dev/null | grep -q "\"$RUNTIME_NAME\":{\"path\":\"$RUNSC_PATH\""; then
        log "dockerd lists runtime '$RUNTIME_NAME' ($RUNSC_PATH); use: docker run --runtime=$RUNTIME_NAME ..."
        exit 0
    fi
    sleep 0.5
done
log "dockerd does not list runtime '$RUNTIME_NAME' at $RUNSC_PATH yet; restart dockerd to load $DAEMON_JSON"
