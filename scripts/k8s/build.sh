#!/usr/bin/env bash
# Build the Kubernetes commands (scripts/k8s/kube: one multicall binary, six
# symlinks) from the Go module proxy, into $K8S_CACHE/kube/<version>-<hash>/.
# The folder's name hashes the wrapper module's files and the build flags, so
# a second run finds it and builds nothing (it does not even start `go`); a
# changed go.mod, main.go or flag builds into a new folder. Prints the folder.
set -euo pipefail
# shellcheck source=scripts/k8s/lib/common.sh
. "$(dirname "${BASH_SOURCE[0]}")/lib/common.sh"

COMMANDS=(kube-apiserver kube-controller-manager kube-scheduler kubelet kube-proxy kubectl)
version="$(kube_version)"
[ -n "$version" ] || die "no k8s.io/kubernetes version in $K8S_DIR/kube/go.mod"

# What Kubernetes' own hack/lib/version.sh stamps (else every component says
# v0.0.0); a fixed date so two builds of one version are the same binary.
# The tags are those of its release builds (hack/lib/golang.sh).
major="${version#v}"; major="${major%%.*}"
minor="${version#v*.}"; minor="${minor%%.*}"
ldflags="-s -w"
for pkg in k8s.io/client-go/pkg/version k8s.io/component-base/version; do
    ldflags+=" -X $pkg.gitVersion=$version -X $pkg.gitMajor=$major -X $pkg.gitMinor=$minor"
    ldflags+=" -X $pkg.gitTreeState=clean -X $pkg.buildDate=1970-01-01T00:00:00Z"
done
tags=selinux,notest,grpcnotrace

hash="$( (cat "$K8S_DIR"/kube/go.mod "$K8S_DIR"/kube/go.sum "$K8S_DIR"/kube/main.go; echo "$tags $ldflags") | sha256sum | cut -c1-12)"
out="$K8S_CACHE/kube/$version-$hash"
if [ -x "$out/kube" ]; then
    echo "$out"
    exit 0
fi

if ! begin_build "$out/kube"; then
    echo "$out"
    exit 0
fi
rm -rf "$out.tmp"
mkdir -p "$out.tmp"
log "building Kubernetes $version (${COMMANDS[*]}) into $out; from cold this takes tens of minutes on 2 cores"
start=$SECONDS
(cd "$K8S_DIR/kube" && nice -n 10 go build -trimpath -tags "$tags" -ldflags "all=$ldflags" -o "$out.tmp/kube" .)
for c in "${COMMANDS[@]}"; do ln -sfn kube "$out.tmp/$c"; done
rm -rf "$out"
mv "$out.tmp" "$out"
# Earlier builds are not used again (a running process keeps its open file).
find "$K8S_CACHE/kube" -mindepth 1 -maxdepth 1 ! -name "$(basename "$out")" -exec rm -rf {} +
log "built in $((SECONDS - start)) s"
echo "$out"
