#!/usr/bin/env bash
# The Pod sandbox ("pause") image, made without a registry: pause.c from the
# k8s.io/kubernetes module (build/pause/linux/pause.c, the source of
# registry.k8s.io/pause) compiled static with the flags of its Makefile, as
# the only file of a one-layer image named $PAUSE_IMAGE, written as a
# `docker save` archive that `ctr images import` reads. Cached in
# $K8S_CACHE/pause/; prints the archive's path.
set -euo pipefail
# shellcheck source=scripts/k8s/lib/common.sh
. "$(dirname "${BASH_SOURCE[0]}")/lib/common.sh"

version="$(kube_version)"
tag="${PAUSE_IMAGE##*:}"
src="$K8S_CACHE/go/mod/k8s.io/kubernetes@$version/build/pause/linux/pause.c"
if [ ! -f "$src" ]; then
    (cd "$K8S_DIR/kube" && GOMODCACHE="$K8S_CACHE/go/mod" GOTOOLCHAIN=local GOFLAGS=-mod=mod \
        go mod download "k8s.io/kubernetes@$version")
fi
[ -f "$src" ] || die "no $src in the k8s.io/kubernetes $version module"
out="$K8S_CACHE/pause/$version-$tag-$(cat "$src" "$K8S_DIR/pause_image.py" | sha256sum | cut -c1-12)"
if [ -f "$out/pause.tar" ]; then
    echo "$out/pause.tar"
    exit 0
fi
command -v gcc >/dev/null 2>&1 || die "gcc is needed to build the pause image"
mkdir -p "$out"
gcc -Os -Wall -Werror -static -DVERSION="v$tag-sandboxd" -o "$out/pause" "$src"
strip "$out/pause"
python3 "$K8S_DIR/pause_image.py" "$out/pause" "$PAUSE_IMAGE" "$out/pause.tar.tmp"
mv "$out/pause.tar.tmp" "$out/pause.tar"
log "built the pause image $PAUSE_IMAGE from $src"
echo "$out/pause.tar"
