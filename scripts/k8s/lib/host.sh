# shellcheck shell=bash
# What the cluster changes on the host, and how `down` takes it back: the
# node's interface, forwarding sysctls, the kernel settings the kubelet
# insists on, and everything the Pods leave behind (mounts, network
# namespaces, veths, iptables chains, cgroups, shim processes, loop devices
# of the volumes). Only what carries this cluster's names or lives under its
# folders is touched: Docker's containers, networks and rules stay as they are.

# The kubelet sets these on start (pkg/kubelet/cm: setupKernelTunables) and
# has no mode that leaves them; `up` records the host's values, `down` puts
# them back.
KUBELET_SYSCTLS=(vm.overcommit_memory vm.panic_on_oom kernel.panic kernel.panic_on_oops kernel.keys.root_maxkeys kernel.keys.root_maxbytes)

host_setup() {
    mkdir -p "$K8S_STATE" "$K8S_RUN" "$K8S_LOGS"
    chmod 700 "$K8S_STATE"
    [ -e /proc/sys/net/bridge/bridge-nf-call-iptables ] \
        || die "the kernel has no br_netfilter: NetworkPolicy between Pods on one bridge cannot be enforced"
    sysctl -qw net.ipv4.ip_forward=1 net.bridge.bridge-nf-call-iptables=1 net.bridge.bridge-nf-call-ip6tables=1
    local saved="$K8S_STATE/host-sysctls.orig" s
    if [ ! -f "$saved" ]; then
        for s in "${KUBELET_SYSCTLS[@]}"; do echo "$s=$(sysctl -n "$s")"; done >"$saved.tmp"
        mv "$saved.tmp" "$saved"
    fi
    if ! ip link show "$NODE_DEV" >/dev/null 2>&1; then
        ip link add "$NODE_DEV" type bridge
    fi
    ip addr replace "$NODE_IP/32" dev "$NODE_DEV"
    ip link set "$NODE_DEV" up
    forward_rules
}

# Docker leaves the FORWARD policy at DROP; the Pods' bridge needs its traffic
# forwarded. Appended after everything else, so the policy chains that
# kube-router puts first (and kube-proxy's) decide before this accepts.
FORWARD_CHAIN=SBXK8S-FORWARD
forward_rules() {
    iptables -w -N "$FORWARD_CHAIN" 2>/dev/null || true
    iptables -w -F "$FORWARD_CHAIN"
    iptables -w -A "$FORWARD_CHAIN" -i "$POD_BRIDGE" -j ACCEPT
    iptables -w -A "$FORWARD_CHAIN" -o "$POD_BRIDGE" -j ACCEPT
    iptables -w -C FORWARD -j "$FORWARD_CHAIN" 2>/dev/null || iptables -w -A FORWARD -j "$FORWARD_CHAIN"
}

remove_forward_rules() {
    while iptables -w -D FORWARD -j "$FORWARD_CHAIN" 2>/dev/null; do :; done
    iptables -w -F "$FORWARD_CHAIN" 2>/dev/null || true
    iptables -w -X "$FORWARD_CHAIN" 2>/dev/null || true
}

host_teardown() {
    kill_leftover_processes
    unmount_under "$K8S_STATE/kubelet"
    unmount_under "$K8S_RUN"
    detach_volume_loops
    remove_pod_network
    remove_pod_cgroups
    if [ -n "${BIN:-}" ] && [ -x "$BIN/kube-proxy" ]; then
        "$BIN/kube-proxy" --cleanup >/dev/null 2>&1 || true
    fi
    remove_kube_rules
    remove_forward_rules
    ip link del "$NODE_DEV" 2>/dev/null || true
    restore_sysctls
}

restore_sysctls() {
    local saved="$K8S_STATE/host-sysctls.orig" line
    [ -f "$saved" ] || return 0
    while IFS= read -r line; do
        sysctl -qw "$line" 2>/dev/null || true
    done <"$saved"
    rm -f "$saved"
}

# Shims and runsc processes of this containerd, and any process left in the
# Pods' cgroups: found by this cluster's socket or runsc root in their command
# line, or by their cgroup, and killed by pid.
kill_leftover_processes() {
    local pid cmd pids=()
    for pid in /proc/[0-9]*; do
        pid="${pid#/proc/}"
        cmd="$( { tr '\0' ' ' <"/proc/$pid/cmdline"; } 2>/dev/null || true)"
        case "$cmd" in
            *"$CONTAINERD_SOCK"* | *"--root=$K8S_RUN/runsc"* | *"--root $K8S_RUN/runsc"*) pids+=("$pid") ;;
        esac
    done
    local f
    for f in /sys/fs/cgroup/pids/kubepods; do
        [ -d "$f" ] || continue
        while IFS= read -r pid; do pids+=("$pid"); done < <(find "$f" -name cgroup.procs -exec cat {} + 2>/dev/null)
    done
    [ "${#pids[@]}" -eq 0 ] && return 0
    kill -KILL "${pids[@]}" 2>/dev/null || true
    sleep 0.5
}

# unmount_under DIR: every mount point under DIR and DIR itself (the kubelet
# bind-mounts its root onto itself), deepest first.
unmount_under() {
    local dir="$1" mp
    [ -d "$dir" ] || return 0
    awk -v d="$dir" 'index($5, d "/") == 1 || $5 == d {print $5}' /proc/self/mountinfo | sort -r | while read -r mp; do
        umount "$mp" 2>/dev/null || umount -l "$mp" 2>/dev/null || true
    done
}

# Mounts and loop devices of the provisioner's volumes (the images stay;
# the provisioner mounts them again on start).
detach_volume_loops() {
    local vol="$K8S_STATE/volumes" dev file
    unmount_under "$vol"
    losetup -nl -O NAME,BACK-FILE 2>/dev/null | while read -r dev file; do
        case "$file" in "$vol/"*) losetup -d "$dev" 2>/dev/null || true ;; esac
    done
}

remove_pod_network() {
    local link
    for link in $(ip -o link show master "$POD_BRIDGE" 2>/dev/null | awk -F': ' '{print $2}' | cut -d@ -f1); do
        ip link del "$link" 2>/dev/null || true
    done
    ip link del "$POD_BRIDGE" 2>/dev/null || true
    # The bridge plugin's masquerade chains of containers that were killed
    # rather than torn down through CNI: named by this network in a comment.
    local rule chain
    { iptables -w -t nat -S POSTROUTING 2>/dev/null || true; } | { grep -F 'name: \"sandboxd-k8s\"' || true; } | while read -r rule; do
        chain="$(echo "$rule" | sed -n 's/.* -j \(CNI-[0-9a-f]*\).*/\1/p')"
        # The rule as iptables -S printed it, quotes and all.
        eval "iptables -w -t nat ${rule/-A/-D}" 2>/dev/null || true
        if [ -n "$chain" ]; then
            iptables -w -t nat -F "$chain" 2>/dev/null || true
            iptables -w -t nat -X "$chain" 2>/dev/null || true
        fi
    done
}

remove_pod_cgroups() {
    local root
    for root in /sys/fs/cgroup/*/kubepods /sys/fs/cgroup/unified/kubepods; do
        [ -d "$root" ] || continue
        find "$root" -depth -type d -exec rmdir {} \; 2>/dev/null || true
    done
}

# Every KUBE-* chain (kube-proxy's, the kubelet's canaries, kube-router's
# firewall) and the jumps to them, and kube-router's ipsets: Kubernetes'
# prefixes, which nothing else on this host uses (Docker's are DOCKER-*).
remove_kube_rules() {
    local table chain rule
    for table in filter nat mangle; do
        for chain in INPUT FORWARD OUTPUT PREROUTING POSTROUTING; do
            # (not every table has every chain: a missing one lists nothing)
            { iptables -w -t "$table" -S "$chain" 2>/dev/null || true; } | { grep -E -- '-j KUBE-' || true; } |
                while read -r rule; do
                    eval "iptables -w -t $table ${rule/-A/-D}" 2>/dev/null || true
                done
        done
        for chain in $( { iptables -w -t "$table" -S 2>/dev/null || true; } | awk '$1 == "-N" && $2 ~ /^KUBE-/ {print $2}'); do
            iptables -w -t "$table" -F "$chain" 2>/dev/null || true
        done
        for chain in $( { iptables -w -t "$table" -S 2>/dev/null || true; } | awk '$1 == "-N" && $2 ~ /^KUBE-/ {print $2}'); do
            iptables -w -t "$table" -X "$chain" 2>/dev/null || true
        done
    done
    if [ -x "${TOOLS:-}/ipset-bin/ipset" ]; then
        local set
        for set in $("$TOOLS/ipset-bin/ipset" list -n 2>/dev/null | { grep -E '^(KUBE-|kube-router-)' || true; }); do
            "$TOOLS/ipset-bin/ipset" destroy "$set" 2>/dev/null || true
        done
    fi
}
