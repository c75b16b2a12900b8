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

# ---- host apt sources: prints "URI SUITE" per enabled `deb` entry -----------
host_apt_sources() {
    local f deb822=() oneline=()
    for f in /etc/apt/sources.list.d/*.sources; do [ -f "$f" ] && deb822+=("$f"); done
    [ -f /etc/apt/sources.list ] && oneline+=(/etc/apt/sources.list)
    for f in /etc/apt/sources.list.d/*.list; do [ -f "$f" ] && oneline+=("$f"); done

    if [ "${#deb822[@]}" -gt 0 ]; then
        awk '
            function flush(   n, m, i, j, U, S) {
                if (types ~ /(^|[ \t])deb([ \t]|$)/ && tolower(enabled) !~ /^[ \t]*no/) {
                    n = split(uris, U, /[ \t]+/); m = split(suites, S, /[ \t]+/)
                    for (i = 1; i <= n; i++) if (U[i] != "")
                        for (j = 1; j <= m; j++) if (S[j] != "") print U[i], S[j]
                }
                types = uris = suites = enabled = last = ""
            }
            FNR == 1 { flush() }
            /^[ \t]*#/ { next }
            /^[ \t]*$/ { flush(); next }
            /^[ \t]/ {               # continuation line
                if (last == "uris") uris = uris " " $0
                else if (last == "suites") suites = suites " " $0
                else if (last == "types") types = types " " $0
                next
            }
            {
                k = tolower($0); sub(/:.*/, "", k)
                v = $0; sub(/^[^:]*:[ \t]*/, "", v)
                last = k
                if (k == "types") types = v
                else if (k == "uris") uris = v
                else if (k == "suites") suites = v
                else if (k == "enabled") enabled = v
            }
            END { flush() }
        ' "${deb822[@]}"
    fi
    if [ "${#oneline[@]}" -gt 0 ]; then
        awk '
            { sub(/#.*/, "") }
            /^[ \t]*deb[ \t]/ {
                line = $0; gsub(/\[[^]]*\]/, " ", line)
                n = split(line, F, /[ \t]+/)
                k = 1; while (k <= n && F[k] == "") k++
                if (F[k] == "deb" && F[k+1] != "" && F[k+2] != "") print F[k+1], F[k+2]
            }
        ' "${oneline[@]}"
    fi
}

usable_uri() { [[ "$1" =~ ^(https?|ftp|file):// ]]; }

# pick_mirror SUITE: a Debian mirror URI taken from the host's own apt sources
# (never a hard-coded host): one serving SUITE itself; failing that, the first
# plain (non-security) Debian-style URI the host uses.
pick_mirror() {
    local want="$1" uri suite fallback=""
    while read -r uri suite; do
        usable_uri "$uri" || continue
        if [ "$suite" = "$want" ]; then echo "$uri"; return 0; fi
        if [ -z "$fallback" ] && [[ "$suite" != *-security* && "$suite" != */updates* && "$uri" != *security* ]]; then
            fallback="$uri"
        fi
    done < <(host_apt_sources)
    [ -n "$fallback" ] && { echo "$fallback"; return 0; }
    return 1
}
