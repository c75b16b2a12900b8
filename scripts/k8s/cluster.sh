#!/usr/bin/env bash
# sandboxd's test Kubernetes cluster: one node on this host, every component
# a detached host process (scripts/k8s/README.md says what each one is and
# where it comes from).
#
#   cluster.sh up                 build/fetch what is missing, start what is
#                                 not running, wait for the node to be Ready
#                                 (seconds when it already is)
#   cluster.sh down               stop everything; remove the Pods' containers,
#                                 mounts, loop devices, network devices and
#                                 rules it made. Keeps the data (etcd, PKI,
#                                 volume images) and the build cache
#   cluster.sh purge              down, then remove the data too
#   cluster.sh status             each component: running or not
#   cluster.sh stop|start|restart COMPONENT
#   cluster.sh kubeconfig         print the admin kubeconfig's path
#   cluster.sh import-image IMAGE copy IMAGE from the local Docker engine into
#                                 the cluster's containerd (no registry here)
#   cluster.sh kubectl ARGS...    the cluster's kubectl with the admin kubeconfig
#
# Root only. Under CI=true a failure exits non-zero with the reason.
set -euo pipefail

# shellcheck source=scripts/k8s/lib/common.sh
. "$(dirname "${BASH_SOURCE[0]}")/lib/common.sh"
# shellcheck source=scripts/lib/apt.sh
. "$K8S_DIR/../lib/apt.sh"
# shellcheck source=scripts/k8s/lib/debs.sh
. "$K8S_DIR/lib/debs.sh"
# shellcheck source=scripts/k8s/lib/pki.sh
. "$K8S_DIR/lib/pki.sh"
# shellcheck source=scripts/k8s/lib/config.sh
. "$K8S_DIR/lib/config.sh"
# shellcheck source=scripts/k8s/lib/components.sh
. "$K8S_DIR/lib/components.sh"
# shellcheck source=scripts/k8s/lib/host.sh
. "$K8S_DIR/lib/host.sh"

ADMIN_KUBECONFIG="$K8S_STATE/admin.kubeconfig"

[ "$(id -u)" -eq 0 ] || die "must run as root (it starts a kubelet and a containerd)"

# ---- what the components run from -------------------------------------------
# BIN: the kube binaries; TOOLS: kube-router, the gVisor shim, ipset; DEB_ROOT:
# unpacked Debian packages. Each is built or fetched once into $K8S_CACHE.
resolve_binaries() {
    BIN="$("$K8S_DIR/build.sh")"
    TOOLS="$("$K8S_DIR/build-tools.sh")"
    debs_fetch trixie "${DEBS_TRIXIE[@]}"
    debs_fetch bookworm "${DEBS_BOOKWORM[@]}"
    ipset_wrapper
}

# kube-router runs `ipset`; Debian's is linked against libipset from the same
# unpacked folder, so a wrapper on kube-router's PATH points the loader there.
ipset_wrapper() {
    local dir="$TOOLS/ipset-bin"
    [ -x "$dir/ipset" ] && return 0
    mkdir -p "$dir"
    cat >"$dir/ipset.tmp" <<EOF
#!/bin/sh
LD_LIBRARY_PATH="${DEB_ROOT[libipset13]}/usr/lib/x86_64-linux-gnu" exec "${DEB_ROOT[ipset]}/usr/sbin/ipset" "\$@"
EOF
    chmod 755 "$dir/ipset.tmp"
    mv "$dir/ipset.tmp" "$dir/ipset"
}

kubectl_admin() { "$BIN/kubectl" --kubeconfig "$ADMIN_KUBECONFIG" "$@"; }

ctr_k8s() { "${DEB_ROOT[containerd]}/usr/bin/ctr" --address "$CONTAINERD_SOCK" --namespace k8s.io "$@"; }

# ---- images --------------------------------------------------------------------

# The pause image, from the pause.c that ships in the k8s.io/kubernetes
# module, compiled static and packed as a one-layer image.
ensure_pause_image() {
    ctr_k8s images ls -q "name==$PAUSE_IMAGE" | grep -q . && return 0
    local tar
    tar="$("$K8S_DIR/pause-image.sh")"
    ctr_k8s images import --no-unpack=false "$tar" >/dev/null
    ctr_k8s images ls -q "name==$PAUSE_IMAGE" | grep -q . || die "the pause image did not import from $tar"
    log "imported $PAUSE_IMAGE"
}

# import_image IMAGE: from the local Docker engine, skipped when containerd
# already has the same image ID under that name.
import_image() {
    local image="$1" id ref stamp
    command -v docker >/dev/null 2>&1 || die "docker is not installed: cannot import $image"
    id="$(docker image inspect --format '{{.Id}}' "$image" 2>/dev/null)" \
        || die "the local Docker engine has no image $image (make image builds the workspace image)"
    ref="$(normalize_ref "$image")"
    stamp="$K8S_STATE/images/$(echo "$ref" | tr '/:@' '___').id"
    if [ "$(cat "$stamp" 2>/dev/null)" = "$id" ] && ctr_k8s images ls -q "name==$ref" | grep -q .; then
        return 0
    fi
    log "importing $image ($id) from Docker into the cluster's containerd"
    docker save "$image" | ctr_k8s images import --no-unpack=false - >/dev/null
    ctr_k8s images ls -q "name==$ref" | grep -q . || die "$image did not import (expected $ref in containerd)"
    mkdir -p "$K8S_STATE/images"
    echo "$id" >"$stamp"
}

# normalize_ref IMAGE: the name containerd and the kubelet know IMAGE by.
normalize_ref() {
    local ref="$1" first="${1%%/*}"
    if [[ "$ref" != */* ]]; then
        ref="docker.io/library/$ref"
    elif [[ "$first" != *.* && "$first" != *:* && "$first" != localhost ]]; then
        ref="docker.io/$ref"
    fi
    [[ "${ref##*/}" == *:* || "$ref" == *@* ]] || ref="$ref:latest"
    echo "$ref"
}

# ---- up / down -------------------------------------------------------------------

all_running() {
    local c
    for c in "${COMPONENTS[@]}"; do
        [ -n "$(component_pid "$c")" ] || return 1
    done
}

node_ready() {
    [ "$(kubectl_admin get node "$NODE_NAME" \
        -o jsonpath='{.status.conditions[?(@.type=="Ready")].status}' 2>/dev/null)" = "True" ]
}

cmd_up() {
    local start=$SECONDS
    resolve_binaries
    if all_running && node_ready; then
        ensure_workspace_image
        log "already up ($((SECONDS - start)) s); admin kubeconfig: $ADMIN_KUBECONFIG"
        echo "$ADMIN_KUBECONFIG"
        return 0
    fi
    host_setup
    pki_ensure
    write_configs
    start_component etcd
    start_component kube-apiserver
    kubectl_admin apply -f "$K8S_DIR/manifests/bootstrap.yaml" >/dev/null
    wait_rbac  # before its watchers start (see rewatch)
    start_component kube-controller-manager
    start_component kube-scheduler
    start_component containerd
    ensure_pause_image
    # Before the kubelet: the provisioner's first pass mounts every volume
    # again, so no Pod starts on an unmounted one.
    start_component provisioner
    start_component kubelet
    # kube-proxy and kube-router read the node's addresses from its object.
    wait_until 60 "node registered" kubectl_admin get node "$NODE_NAME" \
        || die "the kubelet did not register node $NODE_NAME (log: $K8S_LOGS/kubelet.log)"
    start_component kube-proxy
    start_component kube-router
    if ! wait_until 90 "node Ready" node_ready; then
        kubectl_admin describe node "$NODE_NAME" >&2 || true
        die "node $NODE_NAME is not Ready after 90 s (logs: $K8S_LOGS)"
    fi
    ensure_workspace_image
    log "up in $((SECONDS - start)) s: Kubernetes $(kube_version), node $NODE_NAME ($NODE_IP)"
    log "admin kubeconfig: $ADMIN_KUBECONFIG"
    echo "$ADMIN_KUBECONFIG"
}

# The workspace image when the local engine has it (make k8s builds it first).
ensure_workspace_image() {
    local image="${SANDBOXD_IMAGE:-sandboxd-workspace:latest}"
    if docker image inspect "$image" >/dev/null 2>&1; then
        import_image "$image"
    else
        log "note: Docker has no $image; import it later with: $0 import-image $image"
    fi
}

cmd_down() {
    local i c
    # Stopped in the reverse order of start, so nothing restarts what was just stopped.
    for ((i = ${#COMPONENTS[@]} - 1; i >= 0; i--)); do
        c="${COMPONENTS[$i]}"
        [ "$c" = containerd ] && remove_containers
        stop_component "$c"
    done
    host_teardown
    rm -rf "$K8S_RUN"
    log "down (data kept in $K8S_STATE; \`$0 purge\` removes it)"
}

cmd_purge() {
    cmd_down
    detach_volume_loops
    # Mount points are immutable while unmounted (provisioner.py): a volume
    # never released keeps its folder so, and rm could not remove it.
    chattr -R -i "$K8S_STATE/volumes/mnt" 2>/dev/null || true
    rm -rf "$K8S_STATE"
    log "purged $K8S_STATE (the build cache $K8S_CACHE is kept)"
}

# Every task and container of the cluster's containerd, killed and removed
# (Pods come back from the API server's state on the next `up`).
remove_containers() {
    [ -n "$(component_pid containerd)" ] || return 0
    local id
    for id in $(ctr_k8s tasks ls -q 2>/dev/null); do
        ctr_k8s tasks kill -s SIGKILL "$id" >/dev/null 2>&1 || true
    done
    sleep 0.5
    for id in $(ctr_k8s tasks ls -q 2>/dev/null); do
        ctr_k8s tasks delete -f "$id" >/dev/null 2>&1 || true
    done
    for id in $(ctr_k8s containers ls -q 2>/dev/null); do
        ctr_k8s containers delete "$id" >/dev/null 2>&1 || true
    done
}

any_running() {
    local c
    for c in "${COMPONENTS[@]}"; do
        [ -z "$(component_pid "$c")" ] || return 0
    done
    return 1
}

cmd_status() {
    local c pid rc=0
    for c in "${COMPONENTS[@]}"; do
        pid="$(component_pid "$c")"
        if [ -n "$pid" ]; then
            printf '%-24s running (pid %s)\n' "$c" "$pid"
        else
            printf '%-24s stopped\n' "$c"
            rc=3
        fi
    done
    if [ "$rc" -eq 0 ] && node_ready; then echo "node $NODE_NAME Ready"; else echo "node $NODE_NAME not Ready"; rc=3; fi
    return "$rc"
}

known_component() {
    local c
    for c in "${COMPONENTS[@]}"; do [ "$c" = "$1" ] && return 0; done
    die "no component '$1' (one of: ${COMPONENTS[*]})"
}

cmd_start() {
    known_component "$1"
    host_setup
    write_configs
    start_component "$1"
    [ "$1" = kube-apiserver ] && rewatch
    return 0
}

wait_rbac() {
    wait_until 60 "RBAC answers" kubectl_admin auth can-i watch pods --as=system:kube-scheduler \
        || die "the API server's RBAC did not answer in 60 s (log: $K8S_LOGS/kube-apiserver.log)"
}

# A fresh API server answers "forbidden" for a few seconds (its authorizers'
# caches not yet filled) to the clients that reconnect the moment its port
# opens; client-go then backs their watches off for up to a minute, during
# which the scheduler does not see a new claim and the kubelet not a new Pod
# (a sandbox Pending 60 s in CI). A real control plane has several API servers
# behind a balancer, so its clients never meet a cold one: here, the
# components that watch are started again once it is ready.
rewatch() {
    local c
    wait_rbac
    for c in kube-controller-manager kube-scheduler kubelet kube-proxy kube-router; do
        if [ -n "$(component_pid "$c")" ]; then
            stop_component "$c"
            start_component "$c"
        fi
    done
}

main() {
    local cmd="${1:-}"
    shift || true
    case "$cmd" in
        up) cmd_up ;;
        down) BIN="$("$K8S_DIR/build.sh")"; TOOLS="$("$K8S_DIR/build-tools.sh")"; resolve_debs_offline; cmd_down ;;
        purge) BIN="$("$K8S_DIR/build.sh")"; TOOLS="$("$K8S_DIR/build-tools.sh")"; resolve_debs_offline; cmd_purge ;;
        status)
            # Nothing running needs no binaries: on a fresh machine this
            # answers at once instead of building Kubernetes first.
            if ! any_running; then cmd_status; return; fi
            resolve_binaries; cmd_status ;;
        stop) [ $# -eq 1 ] || die "usage: $0 stop COMPONENT"; known_component "$1"; resolve_binaries; stop_component "$1" ;;
        start) [ $# -eq 1 ] || die "usage: $0 start COMPONENT"; resolve_binaries; cmd_start "$1" ;;
        restart)
            [ $# -eq 1 ] || die "usage: $0 restart COMPONENT"
            known_component "$1"; resolve_binaries; stop_component "$1"; cmd_start "$1" ;;
        kubeconfig) [ -f "$ADMIN_KUBECONFIG" ] || die "no cluster yet: run $0 up"; echo "$ADMIN_KUBECONFIG" ;;
        import-image)
            [ $# -eq 1 ] || die "usage: $0 import-image IMAGE"
            resolve_binaries
            [ -n "$(component_pid containerd)" ] || die "the cluster's containerd is not running: $0 up"
            import_image "$1" ;;
        kubectl) resolve_binaries; kubectl_admin "$@" ;;
        *) sed -n '2,24p' "${BASH_SOURCE[0]}" | sed 's/^# \{0,1\}//' >&2; exit 2 ;;
    esac
}

# down and purge must work without the network, from what is unpacked.
resolve_debs_offline() {
    local suite pkg dir
    for suite in trixie bookworm; do
        for dir in "$K8S_CACHE/debs/$suite"/*.current; do
            [ -e "$dir" ] || continue
            pkg="$(basename "$dir" .current)"
            DEB_ROOT[$pkg]="$(readlink -f "$dir")"
        done
    done
}

if [ "${CI:-}" = "true" ]; then
    K8S_COMMAND="$*"
    trap 'rc=$?; [ $rc -eq 0 ] || echo "[k8s] ERROR: CI=true: cluster.sh $K8S_COMMAND failed (exit $rc); the test cluster is required; logs in $K8S_LOGS" >&2' EXIT
fi
main "$@"
