# shellcheck shell=bash
# Paths, addresses and helpers shared by the test cluster's scripts
# (scripts/k8s/). Every fixed fact of the cluster is written here once.
#
# Four fixed folders, none in the work tree:
#   $K8S_CACHE  what is built or downloaded (Go caches, the kube binary,
#               kube-router, the gVisor shim, unpacked Debian packages, the
#               pause image); `down` and `purge` keep it
#   $K8S_STATE  the cluster's data (PKI, kubeconfigs, etcd, containerd and
#               kubelet roots, volume images); `down` keeps it, `purge` removes it
#   $K8S_RUN    sockets, pidfiles, runtime state; `down` removes it
#   $K8S_LOGS   one log file per component

K8S_DIR="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
K8S_CACHE="${SANDBOXD_K8S_CACHE:-/var/cache/sandboxd-k8s}"
K8S_STATE="${SANDBOXD_K8S_STATE:-/var/lib/sandboxd-k8s}"
K8S_RUN="${SANDBOXD_K8S_RUN:-/run/sandboxd-k8s}"
K8S_LOGS="${SANDBOXD_K8S_LOGS:-/var/log/sandboxd-k8s}"

# The node: its own interface and address (the kubelet refuses a loopback
# node IP; the kernel here has no dummy driver, so the interface is a bridge
# with no ports), the Pod bridge and the two ranges. None overlaps Docker's
# 172.17.0.0/16.
NODE_NAME=sandboxd-node
NODE_DEV=sbxk8s0
NODE_IP=10.213.0.1
POD_BRIDGE=sbxk8s-br0
POD_CIDR=10.214.0.0/24
SERVICE_CIDR=10.215.0.0/24
APISERVER_PORT=6443
ETCD_PORT=2379
ETCD_PEER_PORT=2380
CONTAINERD_SOCK="$K8S_RUN/containerd.sock"

# What is built from the Go module proxy besides Kubernetes itself (whose
# version is written in kube/go.mod): the NetworkPolicy enforcer. gVisor's
# containerd shim has its own wrapper module (gvisor-shim/go.mod).
KUBE_ROUTER_PKG=github.com/cloudnativelabs/kube-router/v2/cmd/kube-router@v2.1.0
# The pause image's name is the one the kubelet of this version expects.
PAUSE_IMAGE=registry.k8s.io/pause:3.10.1

# Debian packages: suite -> packages. trixie where bookworm's are too old
# (etcd 3.4, containerd 1.6); runc from bookworm because trixie's needs
# glibc 2.38 and this host has 2.36 (runc re-executes itself, so it cannot
# run under another loader); ipset (for kube-router) from bookworm likewise.
DEBS_TRIXIE=(etcd-server containerd containernetworking-plugins runsc)
DEBS_BOOKWORM=(runc ipset libipset13)

log() { echo "[k8s] $*" >&2; }
die() { echo "[k8s] ERROR: $*" >&2; exit 1; }

# The Kubernetes version: written once, in the wrapper module's go.mod.
kube_version() {
    awk '$1 == "require" && $2 == "k8s.io/kubernetes" {print $3; exit}
         $1 == "k8s.io/kubernetes" && $2 ~ /^v/ {print $2; exit}' "$K8S_DIR/kube/go.mod"
}

# begin_build CHECK: take the cache's build lock (two `make k8s` at once: the
# second waits) and set up Go's caches and flags; false when CHECK, the
# build's result, appeared while waiting.
begin_build() {
    mkdir -p "$K8S_CACHE"
    exec 9>"$K8S_CACHE/.build.lock"
    flock 9
    [ -x "$1" ] && return 1
    command -v go >/dev/null 2>&1 || die "go is not installed (the cluster's programs are built from the Go module proxy)"
    export GOMODCACHE="$K8S_CACHE/go/mod" GOCACHE="$K8S_CACHE/go/build"
    export GOTOOLCHAIN=local GOFLAGS=-mod=mod CGO_ENABLED=0
}

# service_ip N: the Nth address of the Service range (1 is the API server's).
service_ip() { local base="${SERVICE_CIDR%/*}"; echo "${base%.*}.$(( ${base##*.} + $1 ))"; }
