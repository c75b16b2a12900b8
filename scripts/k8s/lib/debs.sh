# shellcheck shell=bash
# Debian packages for the test cluster, taken through apt without touching the
# host's apt state: a private state directory per suite (the host's own
# Debian mirror asked for that suite, its signed index checked against the
# Debian archive keyring), `apt-get download` of each package, unpacked with
# dpkg-deb into $K8S_CACHE/debs/<suite>/<package>_<version>/. Nothing is
# installed with dpkg: the cluster runs the binaries from those folders.
# scripts/register-gvisor.sh fetches runsc the same way.
#
# debs_fetch SUITE PKG...  unpacks what is missing, then sets DEB_ROOT[PKG] to
#                          each package's folder. Once a package is unpacked
#                          it is used as it is, without the network.
# Needs lib/common.sh and scripts/lib/apt.sh (pick_mirror).

declare -gA DEB_ROOT=()

_debs_apt_opts() {  # _debs_apt_opts WORK SOURCES
    printf '%s\n' -o "Dir::Etc::SourceList=$2" -o "Dir::Etc::SourceParts=/dev/null" \
        -o "Dir::Etc::Preferences=/dev/null" -o "Dir::Etc::PreferencesParts=/dev/null" \
        -o "Dir::State::Lists=$1/lists" -o "Dir::State::status=/dev/null" \
        -o "Dir::Cache::Archives=$1/archives" \
        -o "Dir::Cache::pkgcache=" -o "Dir::Cache::srcpkgcache=" -o "APT::Sandbox::User=root"
}

debs_fetch() {
    local suite="$1"; shift
    local base="$K8S_CACHE/debs/$suite" pkg dir missing=()
    mkdir -p "$base"
    for pkg in "$@"; do
        dir="$(readlink -f "$base/$pkg.current" 2>/dev/null || true)"
        if [ -n "$dir" ] && [ -d "$dir" ]; then DEB_ROOT[$pkg]="$dir"; else missing+=("$pkg"); fi
    done
    [ "${#missing[@]}" -eq 0 ] && return 0

    local work mirror opts version deb
    work="$(mktemp -d)"
    mkdir -p "$work/lists/partial" "$work/archives/partial" "$work/dl"
    mirror="$(pick_mirror "$suite")" || { rm -rf "$work"; die "no Debian mirror in the host's apt sources"; }
    echo "deb [signed-by=/usr/share/keyrings/debian-archive-keyring.gpg] $mirror $suite main" >"$work/sources.list"
    mapfile -t opts < <(_debs_apt_opts "$work" "$work/sources.list")
    log "apt-get update (private state, suite $suite) for ${missing[*]}"
    apt-get "${opts[@]}" -q update >&2 || { rm -rf "$work"; die "apt-get update of Debian $suite failed"; }
    for pkg in "${missing[@]}"; do
        version="$(apt-cache "${opts[@]}" show "$pkg" 2>/dev/null | awk '/^Version:/ {print $2}' | sort -V | tail -n1)"
        [ -n "$version" ] || { rm -rf "$work"; die "Debian $suite has no package $pkg"; }
        log "apt-get download $pkg=$version ($suite)"
        (cd "$work/dl" && apt-get "${opts[@]}" -q download "$pkg=$version" >&2) \
            || { rm -rf "$work"; die "could not download $pkg=$version from Debian $suite"; }
        deb="$(ls "$work/dl/${pkg}_"*.deb | head -n1)"
        dir="$base/${pkg}_${version//:/%}"
        rm -rf "$dir.tmp"
        dpkg-deb -x "$deb" "$dir.tmp"
        rm -rf "$dir"
        mv "$dir.tmp" "$dir"
        ln -sfn "$(basename "$dir")" "$base/$pkg.current"
        DEB_ROOT[$pkg]="$dir"
    done
    rm -rf "$work"
}
