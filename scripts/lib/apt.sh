# shellcheck shell=bash
# apt helpers shared by the set-up scripts. The caller defines log().

apt_has_candidate() {
    # true if apt knows an installable version of package $1
    local cand
    cand="$(apt-cache policy "$1" 2>/dev/null | awk '/Candidate:/ {print $2; exit}')"
    [ -n "$cand" ] && [ "$cand" != "(none)" ]
}

apt_install() {
    # apt_install PKG... : install, running `apt-get update` only if needed
    local need_update=0 p
    for p in "$@"; do
        apt_has_candidate "$p" || need_update=1
    done
    if [ "$need_update" -eq 1 ]; then
        log "apt-get update"
        apt-get update -q
    fi
    log "apt-get install -y $*"
    DEBIAN_FRONTEND=noninteractive apt-get install -y -q --no-install-recommends "$@"
}
