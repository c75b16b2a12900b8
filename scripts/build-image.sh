#!/usr/bin/env bash
# Build the sandboxd workspace image from images/workspace/.
#
#   scripts/build-image.sh [IMAGE_TAG [CONTEXT_DIR]]
#       IMAGE_TAG    default: sandboxd-workspace:latest
#       CONTEXT_DIR  default: images/workspace (another folder with a Dockerfile
#                    that takes ARG BASE, e.g. an older images/workspace taken
#                    from git for a before/after bench)
#   scripts/build-image.sh --hash [CONTEXT_DIR]
#       print the context's hash (what the label would say) and build nothing
#
# Idempotent: the image carries label sandboxd.image.hash=<sha256 of the
# context's files>; if the tag already has the current hash nothing is done.
# A rebuild removes the image the tag had before if nothing else uses it.
#
# Base image, first that works:
#   1. $SANDBOXD_BASE_IMAGE if set (must exist locally or be pullable)
#   2. debian:bookworm-slim already present locally
#   3. sandboxd-base:bookworm already present locally (made by step 5 earlier)
#   4. `docker pull debian:bookworm-slim` (short timeout)
#   5. offline: debootstrap --variant=minbase bookworm from the host's own apt
#      mirror (read from /etc/apt at run time) and `docker import` it as
#      sandboxd-base:bookworm
#
# Environment:
#   SANDBOXD_BASE_IMAGE    force a base image
#   SANDBOXD_PULL_TIMEOUT  seconds for the docker pull attempt (default 20)
#   SANDBOXD_BUILDER       auto (default) | buildx | legacy
#   SANDBOXD_FORCE_BUILD=1 rebuild even if the hash matches
set -euo pipefail

log() { echo "[build-image] $*" >&2; }
die() { echo "[build-image] ERROR: $*" >&2; exit 1; }

SCRIPT_DIR="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
REPO_DIR="$(cd "$SCRIPT_DIR/.." && pwd)"
PRINT_HASH=0
if [ "${1:-}" = "--hash" ]; then
    PRINT_HASH=1
    shift
    set -- "" "$@"
fi
TAG="${1:-sandboxd-workspace:latest}"
CONTEXT_DIR="$(cd "${2:-$REPO_DIR/images/workspace}" && pwd)"

SUITE=bookworm
UPSTREAM_BASE="debian:${SUITE}-slim"
LOCAL_BASE="sandboxd-base:${SUITE}"
PULL_TIMEOUT="${SANDBOXD_PULL_TIMEOUT:-20}"

[ -f "$CONTEXT_DIR/Dockerfile" ] || die "missing $CONTEXT_DIR/Dockerfile"

# ---- content hash of the build context --------------------------------------
context_hash() {
    (
        cd "$CONTEXT_DIR"
        find . -type f -print0 | LC_ALL=C sort -z | xargs -0 -r sha256sum | sha256sum | cut -d' ' -f1
    )
}
HASH="$(context_hash)"
if [ "$PRINT_HASH" = 1 ]; then
    echo "$HASH"
    exit 0
fi

"$SCRIPT_DIR/ensure-docker.sh"

image_hash() {
    docker image inspect --format '{{ index .Config.Labels "sandboxd.image.hash" }}' "$1" 2>/dev/null || true
}
image_exists() { docker image inspect "$1" >/dev/null 2>&1; }

up_to_date() {
    [ "${SANDBOXD_FORCE_BUILD:-0}" != "1" ] && [ "$(image_hash "$TAG")" = "$HASH" ]
}

if up_to_date; then
    log "$TAG up to date (hash ${HASH:0:12})"
    exit 0
fi

# ---- serialize concurrent builds of the same tag -----------------------------
# (per tag: a scratch tag, e.g. the bench's, does not wait for `make image`)
LOCK_FILE="/tmp/sandboxd-build-image.$(printf '%s' "$TAG" | tr -c 'A-Za-z0-9._-' '_').lock"
if command -v flock >/dev/null 2>&1; then
    exec 9>"$LOCK_FILE"
    if ! flock -n 9; then
        log "another build is running; waiting for it"
        flock 9
    fi
    if up_to_date; then
        log "$TAG up to date (hash ${HASH:0:12}, built by a concurrent run)"
        exit 0
    fi
fi

# ---- apt helpers (host) -----------------------------------------------------
# shellcheck source=scripts/lib/apt.sh
. "$(dirname "${BASH_SOURCE[0]}")/lib/apt.sh"

# ---- offline base: debootstrap + docker import ------------------------------
BOOTSTRAP_DIR=""
cleanup_bootstrap() {
    [ -n "$BOOTSTRAP_DIR" ] && [ -d "$BOOTSTRAP_DIR" ] || return 0
    # debootstrap may leave proc/sys mounted if interrupted: unmount first
    local m
    while IFS= read -r m; do
        umount -l "$m" 2>/dev/null || true
    done < <(awk -v d="$BOOTSTRAP_DIR/" 'index($2, d) == 1 {print $2}' /proc/mounts | sort -r)
    rm -rf --one-file-system "$BOOTSTRAP_DIR"
}

bootstrap_base() {
    [ "$(id -u)" -eq 0 ] || die "building the offline base image needs root (debootstrap)"
    local mirror
    mirror="$(pick_mirror "$SUITE")" || die "no usable Debian mirror found in /etc/apt/sources.list{,.d/*}"
    log "no registry image available: bootstrapping $LOCAL_BASE with debootstrap from $mirror"
    command -v debootstrap >/dev/null 2>&1 || apt_install debootstrap

    BOOTSTRAP_DIR="$(mktemp -d /var/tmp/sandboxd-base.XXXXXX)"
    trap cleanup_bootstrap EXIT
    local root="$BOOTSTRAP_DIR/rootfs"
    mkdir -p "$root"

    log "debootstrap --variant=minbase $SUITE (takes a minute or two)"
    debootstrap --variant=minbase --components=main "$SUITE" "$root" "$mirror" \
        || die "debootstrap failed (see $root/debootstrap/debootstrap.log if it still exists)"

    # apt sources for the image: the host's own entries for $SUITE,
    # $SUITE-updates and $SUITE-security (the host reaches them, and containers
    # reach what the host reaches); fall back to the bare mirror if that fails.
    local uri suite
    {
        echo "# written by sandboxd scripts/build-image.sh from the build host's apt sources"
        while read -r uri suite; do
            usable_uri "$uri" || continue
            case "$suite" in
                "$SUITE" | "$SUITE-updates" | "$SUITE-security" | "$SUITE/updates") echo "deb $uri $suite main" ;;
            esac
        done < <(host_apt_sources | awk '!seen[$0]++')
    } >"$root/etc/apt/sources.list.sandboxd"
    if ! grep -q "^deb .* $SUITE main$" "$root/etc/apt/sources.list.sandboxd"; then
        echo "deb $mirror $SUITE main" >>"$root/etc/apt/sources.list.sandboxd"
    fi
    cp "$root/etc/apt/sources.list" "$root/etc/apt/sources.list.debootstrap"
    mv "$root/etc/apt/sources.list.sandboxd" "$root/etc/apt/sources.list"
    log "checking apt sources inside the base:"
    sed 's/^/    /' "$root/etc/apt/sources.list" >&2
    if chroot "$root" apt-get update -q >/dev/null 2>&1; then
        rm -f "$root/etc/apt/sources.list.debootstrap"
    else
        log "apt-get update in the base failed with those sources; keeping debootstrap's own ($mirror $SUITE)"
        mv "$root/etc/apt/sources.list.debootstrap" "$root/etc/apt/sources.list"
    fi

    # Slim it down like the official -slim images.
    cat >"$root/etc/dpkg/dpkg.cfg.d/90-sandboxd-slim" <<'EOF'
# like debian:*-slim: no docs, man pages or translations
path-exclude /usr/share/doc/*
path-include /usr/share/doc/*/copyright
path-exclude /usr/share/man/*
path-exclude /usr/share/groff/*
path-exclude /usr/share/info/*
path-exclude /usr/share/lintian/*
path-exclude /usr/share/linda/*
path-exclude /usr/share/locale/*
EOF
    find "$root/usr/share/doc" -mindepth 1 -not -name copyright -not -type d -delete 2>/dev/null || true
    find "$root/usr/share/doc" -mindepth 1 -type d -empty -delete 2>/dev/null || true
    rm -rf "$root"/usr/share/man/* "$root"/usr/share/info/* "$root"/usr/share/locale/* \
           "$root"/var/cache/apt/archives/*.deb "$root"/var/cache/apt/*.bin \
           "$root"/var/lib/apt/lists/* "$root"/var/log/* "$root"/debootstrap \
           "$root"/tmp/* "$root"/var/tmp/*
    mkdir -p "$root/var/lib/apt/lists/partial"
    # Docker supplies these at run time; do not bake in the build host's.
    : >"$root/etc/resolv.conf"
    echo localhost >"$root/etc/hostname"
    printf '127.0.0.1\tlocalhost\n::1\tlocalhost ip6-localhost ip6-loopback\n' >"$root/etc/hosts"

    log "docker import -> $LOCAL_BASE"
    tar --numeric-owner -C "$root" -c . | docker import \
        --change 'LABEL sandboxd.managed=true' \
        --change 'ENV PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin' \
        --change 'CMD ["bash"]' \
        --message "sandboxd: debootstrap --variant=minbase $SUITE" \
        - "$LOCAL_BASE" >/dev/null
    cleanup_bootstrap
    BOOTSTRAP_DIR=""
    trap - EXIT
    log "base image $LOCAL_BASE ready"
}

pick_base() {
    if [ -n "${SANDBOXD_BASE_IMAGE:-}" ]; then
        if ! image_exists "$SANDBOXD_BASE_IMAGE"; then
            log "pulling $SANDBOXD_BASE_IMAGE"
            docker pull "$SANDBOXD_BASE_IMAGE" >&2 || die "base image $SANDBOXD_BASE_IMAGE not available"
        fi
        BASE="$SANDBOXD_BASE_IMAGE"; return
    fi
    if image_exists "$UPSTREAM_BASE"; then BASE="$UPSTREAM_BASE"; return; fi
    if image_exists "$LOCAL_BASE"; then BASE="$LOCAL_BASE"; return; fi
    # Builds of different tags run side by side: one makes the base, the
    # others wait for it and use it.
    if command -v flock >/dev/null 2>&1; then
        exec 8>/tmp/sandboxd-build-base.lock
        flock 8
        if image_exists "$LOCAL_BASE"; then BASE="$LOCAL_BASE"; return; fi
    fi
    log "trying docker pull $UPSTREAM_BASE (timeout ${PULL_TIMEOUT}s)"
    if timeout "$PULL_TIMEOUT" docker pull "$UPSTREAM_BASE" >&2 2>&1 && image_exists "$UPSTREAM_BASE"; then
        BASE="$UPSTREAM_BASE"; return
    fi
    log "docker pull $UPSTREAM_BASE failed (no registry?)"
    bootstrap_base
    BASE="$LOCAL_BASE"
}

# ---- build ------------------------------------------------------------------
start=$(date +%s)
old_id="$(docker image inspect --format '{{.Id}}' "$TAG" 2>/dev/null || true)"
if [ -n "$old_id" ]; then
    log "$TAG is stale (hash $(image_hash "$TAG" | cut -c1-12) != ${HASH:0:12}); rebuilding"
else
    log "$TAG not built yet; building"
fi

BASE=""
pick_base
log "base image: $BASE"

builder="${SANDBOXD_BUILDER:-auto}"
if [ "$builder" = "auto" ]; then
    if docker buildx version >/dev/null 2>&1; then builder=buildx; else builder=legacy; fi
fi
build_args=(--build-arg "BASE=$BASE" --label "sandboxd.image.hash=$HASH" --label "sandboxd.managed=true" -t "$TAG" "$CONTEXT_DIR")
case "$builder" in
    buildx)
        log "docker buildx build (BuildKit) -> $TAG"
        docker buildx build --progress=plain --load "${build_args[@]}"
        ;;
    legacy)
        log "docker build (legacy builder; no buildx plugin) -> $TAG"
        DOCKER_BUILDKIT=0 docker build "${build_args[@]}"
        ;;
    *) die "SANDBOXD_BUILDER must be auto, buildx or legacy (got '$builder')" ;;
esac

[ "$(image_hash "$TAG")" = "$HASH" ] || die "build finished but $TAG does not carry sandboxd.image.hash=$HASH"

# drop the previous image if it is now untagged (dangling); docker refuses
# while a container still uses it, which is fine
new_id="$(docker image inspect --format '{{.Id}}' "$TAG")"
if [ -n "$old_id" ] && [ "$old_id" != "$new_id" ] \
    && [ "$(docker image inspect --format '{{len .RepoTags}}' "$old_id" 2>/dev/null || echo 1)" = "0" ]; then
    if docker image rm "$old_id" >/dev/null 2>&1; then log "removed previous image ${old_id:7:12}"; fi
fi

log "built $TAG (${new_id:7:12}, hash ${HASH:0:12}) in $(( $(date +%s) - start ))s"
