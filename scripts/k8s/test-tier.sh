#!/usr/bin/env bash
# The kubernetes tier inside `make test` (.ci/run): the cluster is brought up
# in the background as early as possible (cold, on a fresh machine, that is
# the build: ~20 min of CPU, Go modules and Debian packages fetched), the
# other tiers run meanwhile, then the kubernetes tier (tests/kubernetes and
# the conformance suite on the kubernetes backend) runs, and the cluster is
# taken down again if this run brought it up (a cluster found up is left up:
# on a shared machine it may be someone else's).
#
#   test-tier.sh start    start `cluster.sh up` in the background (log: $RUN/up.log)
#   test-tier.sh run ...  wait for it, run pytest with ARGS, take the cluster down
set -euo pipefail
cd "$(dirname "$0")/../.."
RUN="${SANDBOXD_K8S_TIER_DIR:-.k8s-test}"
CLUSTER=scripts/k8s/cluster.sh

case "${1:-}" in
start)
    mkdir -p "$RUN"
    rm -f "$RUN"/up.rc "$RUN"/found-up
    if "$CLUSTER" status >/dev/null 2>&1; then
        touch "$RUN/found-up"
    fi
    # Its own session: make's end does not stop it; `run` waits for it.
    setsid bash -c "start=\$(date +%s); $CLUSTER up >'$RUN/up.log' 2>&1; rc=\$?; \
        echo \"\$((\$(date +%s) - start))\" >'$RUN/up.seconds'; echo \$rc >'$RUN/up.rc'" \
        </dev/null >/dev/null 2>&1 &
    echo "[k8s] cluster coming up in the background (log: $RUN/up.log)"
    ;;
run)
    shift
    [ -d "$RUN" ] || "$0" start
    while [ ! -f "$RUN/up.rc" ]; do sleep 5; done
    rc="$(cat "$RUN/up.rc")"
    echo "[k8s] cluster up: exit $rc after $(cat "$RUN/up.seconds") s (cold builds included)"
    if [ "$rc" != 0 ]; then
        tail -n 40 "$RUN/up.log" >&2
        exit "$rc"
    fi
    status=0
    SANDBOXD_K8S_TESTS=1 "$@" || status=$?
    if [ "$status" != 0 ]; then
        # What CI keeps is this output: the cluster's side of a failure,
        # before the cluster (and its logs' context) is gone.
        echo "[k8s] the tier failed; the cluster's recent events and logs:" >&2
        "$CLUSTER" kubectl get events -A --sort-by=.lastTimestamp 2>&1 | tail -n 40 >&2 || true
        for component in provisioner kube-scheduler kubelet; do
            echo "[k8s] --- $component (last lines)" >&2
            tail -n 15 "${SANDBOXD_K8S_LOGS:-/var/log/sandboxd-k8s}/$component.log" >&2 || true
        done
    fi
    if [ ! -f "$RUN/found-up" ]; then
        "$CLUSTER" down || status=$?
    fi
    rm -rf "$RUN"
    exit "$status"
    ;;
*)
    echo "usage: $0 start | run PYTEST-COMMAND..." >&2
    exit 2
    ;;
esac
