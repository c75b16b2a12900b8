#!/usr/bin/env bash
# Build the sandboxd sidecar image (sandboxd itself in a container).
#
#   images/sandboxd/build.sh [IMAGE_TAG]        (default: sandboxd:latest)
#
# Idempotent like scripts/build-image.sh: the image carries the label
# sandboxd.image.hash=<sha256 of its build context>, and a tag that already
# has the current hash is left alone (SANDBOXD_FORCE_BUILD=1 rebuilds).
#
# The base is the one the workspace image uses: $SANDBOXD_BASE_IMAGE, else
# debian:bookworm-slim if present locally, else sandboxd-base:bookworm (made
# by `make image` when no registry answers).
set -euo pipefail

log() { echo "[sidecar-image] $*" >&2; }
die() { echo "[sidecar-image] ERROR: $*" >&2; exit 1; }

HERE="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
REPO_DIR="$(cd "$HERE/../.." && pwd)"
TAG="${1:-sandboxd:latest}"

image_exists() { docker image inspect "$1" >/dev/null 2>&1; }
image_hash() {
    docker image inspect --format '{{ index .Config.Labels "sandboxd.image.hash" }}' "$1" 2>/dev/null || true
}

# The context is assembled, not the repository itself: the legacy builder
# would otherwise upload .venv and every cache, and the hash would move with them.
CONTEXT="$(mktemp -d /tmp/sandboxd-sidecar.XXXXXX)"
trap 'rm -rf "$CONTEXT"' EXIT
mkdir -p "$CONTEXT/src"
cp "$HERE/Dockerfile" "$CONTEXT/Dockerfile"
cp "$REPO_DIR/pyproject.toml" "$REPO_DIR/README.md" "$REPO_DIR/LICENSE" "$REPO_DIR/NOTICE" "$CONTEXT/src/"
for dir in sandboxd runtime_client examples; do
    (cd "$REPO_DIR" && find "$dir" -type f ! -path '*/__pycache__/*' ! -name '*.pyc' -print0) \
        | (cd "$REPO_DIR" && xargs -0 -r cp --parents -t "$CONTEXT/src")
done
# The host's extra CAs, for pip inside the build (see the Dockerfile).
mkdir -p "$CONTEXT/certs"
: >"$CONTEXT/certs/.keep"
for cert in /usr/local/share/ca-certificates/*.crt; do
    [ -f "$cert" ] && cp "$cert" "$CONTEXT/certs/"
done
HASH="$(cd "$CONTEXT" && find . -type f -print0 | LC_ALL=C sort -z | xargs -0 -r sha256sum | sha256sum | cut -d' ' -f1)"

if [ "${SANDBOXD_FORCE_BUILD:-0}" != "1" ] && [ "$(image_hash "$TAG")" = "$HASH" ]; then
    log "$TAG up to date (hash ${HASH:0:12})"
    exit 0
fi

if [ -n "${SANDBOXD_BASE_IMAGE:-}" ]; then
    BASE="$SANDBOXD_BASE_IMAGE"
elif image_exists debian:bookworm-slim; then
    BASE=debian:bookworm-slim
elif image_exists sandboxd-base:bookworm; then
    BASE=sandboxd-base:bookworm
else
    die "no base image: run \`make image\` first (it makes sandboxd-base:bookworm when no registry answers)"
fi

old_id="$(docker image inspect --format '{{.Id}}' "$TAG" 2>/dev/null || true)"
log "building $TAG from $BASE (hash ${HASH:0:12})"
start=$(date +%s)
if docker buildx version >/dev/null 2>&1; then
    docker buildx build --progress=plain --load --build-arg "BASE=$BASE" \
        --label "sandboxd.image.hash=$HASH" --label "sandboxd.managed=true" -t "$TAG" "$CONTEXT"
else
    DOCKER_BUILDKIT=0 docker build --force-rm --build-arg "BASE=$BASE" \
        --label "sandboxd.image.hash=$HASH" --label "sandboxd.managed=true" -t "$TAG" "$CONTEXT"
fi
[ "$(image_hash "$TAG")" = "$HASH" ] || die "build finished but $TAG lacks sandboxd.image.hash=$HASH"

new_id="$(docker image inspect --format '{{.Id}}' "$TAG")"
if [ -n "$old_id" ] && [ "$old_id" != "$new_id" ] \
    && [ "$(docker image inspect --format '{{len .RepoTags}}' "$old_id" 2>/dev/null || echo 1)" = "0" ]; then
    docker image rm "$old_id" >/dev/null 2>&1 && log "removed previous image ${old_id:7:12}" || true
fi
# The legacy builder leaves each build stage behind untagged; the newest is the
# layer cache of the next build (dependencies), older ones are only disk.
stages="$(docker images -q --filter dangling=true --filter label=sandboxd.image=sandboxd-build)"
for id in $(echo "$stages" | tail -n +2); do
    docker image rm "$id" >/dev/null 2>&1 || true
done
log "built $TAG (${new_id:7:12}) in $(( $(date +%s) - start ))s"
