#!/usr/bin/env bash
# Build the two Go programs the cluster runs besides Kubernetes, from the Go
# module proxy, into $K8S_CACHE/tools/<hash>/:
#   kube-router/kube-router               NetworkPolicy enforcement (iptables +
#                                         ipset); version in lib/common.sh
#   gvisor-shim/containerd-shim-runsc-v1  containerd's shim for runsc, from the
#                                         wrapper module gvisor-shim/ with one
#                                         file of a dependency overlaid
#                                         (gvisor-shim/oom_unix.go says why)
# Like build.sh: a second run finds the folder and builds nothing. Prints it.
set -euo pipefail
# shellcheck source=scripts/k8s/lib/common.sh
. "$(dirname "${BASH_SOURCE[0]}")/lib/common.sh"

SHIM_SRC="$K8S_DIR/gvisor-shim"
# The file the overlay replaces, as the vendor folder holds it.
SHIM_OVERLAID=vendor/github.com/containerd/containerd/sys/oom_unix.go
kube_router_ldflags="-s -w -X github.com/cloudnativelabs/kube-router/v2/pkg/version.Version=${KUBE_ROUTER_PKG##*@}"
# gVisor reaches into the Go runtime by linkname, which newer linkers refuse
# unless told not to check.
shim_ldflags="-s -w -checklinkname=0"
# The folder's name hashes what is built and how.
hash="$( (printf '%s\n' "$KUBE_ROUTER_PKG" "$kube_router_ldflags" "$shim_ldflags" "$SHIM_OVERLAID"
          cat "$SHIM_SRC/go.mod" "$SHIM_SRC/go.sum" "$SHIM_SRC/main.go" "$SHIM_SRC/oom_unix.go") | sha256sum | cut -c1-12)"
out="$K8S_CACHE/tools/$hash"
if [ -x "$out/kube-router/kube-router" ] && [ -x "$out/gvisor-shim/containerd-shim-runsc-v1" ]; then
    echo "$out"
    exit 0
fi

if ! begin_build "$out/gvisor-shim/containerd-shim-runsc-v1"; then
    echo "$out"
    exit 0
fi
rm -rf "$out.tmp"
mkdir -p "$out.tmp/kube-router" "$out.tmp/gvisor-shim" "$out.tmp/src"
start=$SECONDS
log "building $KUBE_ROUTER_PKG"
GOBIN="$out.tmp/kube-router" nice -n 10 go install -trimpath -ldflags "$kube_router_ldflags" "$KUBE_ROUTER_PKG"

log "building gVisor's containerd shim ($(awk '$1 == "require" {print $3}' "$SHIM_SRC/go.mod"))"
# Go overlays no file of the module cache, so the shim builds from a vendor
# folder of its own (in the cache, never in the work tree).
cp "$SHIM_SRC/go.mod" "$SHIM_SRC/go.sum" "$SHIM_SRC/main.go" "$out.tmp/src/"
(cd "$out.tmp/src" && go mod vendor)
[ -f "$out.tmp/src/$SHIM_OVERLAID" ] || die "the gVisor shim's dependencies have no $SHIM_OVERLAID to overlay"
printf '{"Replace": {"%s": "%s"}}\n' "$out.tmp/src/$SHIM_OVERLAID" "$SHIM_SRC/oom_unix.go" >"$out.tmp/src/overlay.json"
(cd "$out.tmp/src" && GOFLAGS=-mod=vendor nice -n 10 go build -trimpath -overlay overlay.json -ldflags "$shim_ldflags" \
    -o "$out.tmp/gvisor-shim/containerd-shim-runsc-v1" .)
rm -rf "$out.tmp/src"
rm -rf "$out"
mv "$out.tmp" "$out"
# Earlier builds are not used again (a running process keeps its open file).
find "$K8S_CACHE/tools" -mindepth 1 -maxdepth 1 ! -name "$(basename "$out")" -exec rm -rf {} +
log "built in $((SECONDS - start)) s"
echo "$out"
