# shellcheck shell=bash
# The cluster's components: how each is started (its command line and the
# configuration files it reads), how its readiness is checked, and the
# generic detached start/stop with pidfiles and log files.
#
# Every component runs as a plain host process in its own session (setsid),
# so it outlives the `make` or shell that started it; its pid is in
# $K8S_RUN/<name>.pid and its output in $K8S_LOGS/<name>.log.
#
# Needs lib/common.sh, and BIN, DEB_ROOT, TOOLS set by cluster.sh.

COMPONENTS=(etcd kube-apiserver kube-controller-manager kube-scheduler containerd provisioner kubelet kube-proxy kube-router)

pidfile() { echo "$K8S_RUN/$1.pid"; }

# component_pid NAME: the live pid of NAME, or nothing. The pid is checked
# against the program it runs, so a pid reused by another process is not ours.
component_pid() {
    local pid argv0 argv1
    pid="$(cat "$(pidfile "$1")" 2>/dev/null || true)"
    [ -n "$pid" ] && [ -r "/proc/$pid/cmdline" ] || return 0
    { IFS= read -r -d '' argv0 && IFS= read -r -d '' argv1; } <"/proc/$pid/cmdline" 2>/dev/null || true
    case "$1" in
        provisioner) [ "$(basename "${argv1:-}")" = provisioner.py ] && echo "$pid" ;;
        *) [ "$(basename "${argv0:-}")" = "$1" ] && echo "$pid" ;;
    esac
    return 0
}

spawn() {  # spawn NAME CMD...: start detached, output appended to its log
    local name="$1"; shift
    mkdir -p "$K8S_LOGS" "$K8S_RUN"
    echo "---- $(date -u +%FT%TZ) start: $*" >>"$K8S_LOGS/$name.log"
    # A background job of a non-interactive shell is not a process group
    # leader, so setsid makes the new session in place and $! is the pid.
    (exec setsid "$@" >>"$K8S_LOGS/$name.log" 2>&1 </dev/null) &
    echo $! >"$(pidfile "$name")"
}

# Seconds between SIGTERM and SIGKILL. The API server drains its requests in
# a fraction of a second and then waits for its open watches (up to a minute);
# everything it holds is in etcd, so it is not waited for.
stop_grace() {
    case "$1" in
        kube-apiserver) echo 3 ;;
        *) echo 15 ;;
    esac
}

stop_component() {  # stop_component NAME
    local name="$1" grace pid i
    grace="$(stop_grace "$1")"
    pid="$(component_pid "$name")"
    if [ -z "$pid" ]; then rm -f "$(pidfile "$name")"; return 0; fi
    kill -TERM "$pid" 2>/dev/null || true
    for ((i = 0; i < grace * 10; i++)); do
        [ -d "/proc/$pid" ] || break
        sleep 0.1
    done
    if [ -d "/proc/$pid" ]; then
        [ "$name" = kube-apiserver ] || log "$name (pid $pid) did not stop in ${grace}s; killing it"
        kill -KILL "$pid" 2>/dev/null || true
        sleep 0.2
    fi
    rm -f "$(pidfile "$name")"
    log "stopped $name"
}

# wait_until SECONDS WHAT CMD...: poll CMD every 0.2 s.
wait_until() {
    local timeout="$1" what="$2" deadline
    shift 2
    deadline=$((SECONDS + timeout))
    until "$@" >/dev/null 2>&1; do
        if [ "$SECONDS" -ge "$deadline" ]; then
            return 1
        fi
        sleep 0.2
    done
}

start_component() {  # start_component NAME: start it unless running, wait until ready
    local name="$1" timeout
    if [ -n "$(component_pid "$name")" ]; then
        return 0
    fi
    "prepare_$name"
    # shellcheck disable=SC2046
    spawn "$name" $(env_of "$name") "$(command_of "$name")" $(args_of "$name")
    timeout="$(ready_timeout "$name")"
    if ! wait_until "$timeout" "$name" "ready_$name"; then
        tail -n 30 "$K8S_LOGS/$name.log" >&2 || true
        die "$name did not become ready in ${timeout}s (log: $K8S_LOGS/$name.log)"
    fi
    [ -n "$(component_pid "$name")" ] || die "$name exited (log: $K8S_LOGS/$name.log)"
    log "started $name (pid $(component_pid "$name"))"
}

ready_timeout() {
    case "$1" in
        kube-apiserver) echo 90 ;;
        kubelet) echo 60 ;;
        *) echo 45 ;;
    esac
}

# ---- how each component is run ---------------------------------------------

env_of() {
    # Extra environment (as `env VAR=...` words) for components that exec
    # helpers found on PATH.
    case "$1" in
        containerd) echo "env PATH=$TOOLS/gvisor-shim:${DEB_ROOT[containerd]}/usr/bin:$PATH" ;;
        kube-router) echo "env PATH=$TOOLS/ipset-bin:$PATH" ;;
        *) ;;
    esac
}

command_of() {
    case "$1" in
        etcd) echo "${DEB_ROOT[etcd-server]}/usr/bin/etcd" ;;
        containerd) echo "${DEB_ROOT[containerd]}/usr/bin/containerd" ;;
        kube-router) echo "$TOOLS/kube-router/kube-router" ;;
        provisioner) echo /usr/bin/python3 ;;
        *) echo "$BIN/$1" ;;
    esac
}

args_of() {
    local pki="$K8S_STATE/pki" cfg="$K8S_STATE/config"
    case "$1" in
        etcd)
            echo "--name=sandboxd-k8s --data-dir=$K8S_STATE/etcd"
            echo "--listen-client-urls=https://127.0.0.1:$ETCD_PORT --advertise-client-urls=https://127.0.0.1:$ETCD_PORT"
            echo "--listen-peer-urls=http://127.0.0.1:$ETCD_PEER_PORT --initial-advertise-peer-urls=http://127.0.0.1:$ETCD_PEER_PORT"
            echo "--initial-cluster=sandboxd-k8s=http://127.0.0.1:$ETCD_PEER_PORT --listen-metrics-urls="
            echo "--cert-file=$pki/etcd-server.crt --key-file=$pki/etcd-server.key"
            echo "--client-cert-auth --trusted-ca-file=$pki/ca.crt"
            ;;
        kube-apiserver)
            echo "--advertise-address=$NODE_IP --bind-address=$NODE_IP --secure-port=$APISERVER_PORT"
            echo "--etcd-servers=https://127.0.0.1:$ETCD_PORT --etcd-cafile=$pki/ca.crt"
            echo "--etcd-certfile=$pki/apiserver-etcd-client.crt --etcd-keyfile=$pki/apiserver-etcd-client.key"
            echo "--service-cluster-ip-range=$SERVICE_CIDR"
            echo "--authorization-mode=Node,RBAC --enable-admission-plugins=NodeRestriction"
            echo "--client-ca-file=$pki/ca.crt --tls-cert-file=$pki/apiserver.crt --tls-private-key-file=$pki/apiserver.key"
            echo "--kubelet-client-certificate=$pki/apiserver-kubelet-client.crt"
            echo "--kubelet-client-key=$pki/apiserver-kubelet-client.key"
            echo "--kubelet-certificate-authority=$pki/ca.crt --kubelet-preferred-address-types=InternalIP"
            echo "--service-account-issuer=https://kubernetes.default.svc.cluster.local"
            echo "--service-account-key-file=$pki/sa.pub --service-account-signing-key-file=$pki/sa.key"
            echo "--profiling=false --v=1"
            ;;
        kube-controller-manager)
            echo "--kubeconfig=$K8S_STATE/controller-manager.kubeconfig"
            echo "--authentication-kubeconfig=$K8S_STATE/controller-manager.kubeconfig"
            echo "--authorization-kubeconfig=$K8S_STATE/controller-manager.kubeconfig"
            echo "--bind-address=127.0.0.1 --leader-elect=false --use-service-account-credentials=true"
            echo "--service-account-private-key-file=$pki/sa.key --root-ca-file=$pki/ca.crt"
            echo "--cluster-signing-cert-file=$pki/ca.crt --cluster-signing-key-file=$pki/ca.key"
            echo "--cluster-name=sandboxd-k8s --service-cluster-ip-range=$SERVICE_CIDR --profiling=false --v=1"
            ;;
        kube-scheduler)
            echo "--kubeconfig=$K8S_STATE/scheduler.kubeconfig"
            echo "--authentication-kubeconfig=$K8S_STATE/scheduler.kubeconfig"
            echo "--authorization-kubeconfig=$K8S_STATE/scheduler.kubeconfig"
            echo "--bind-address=127.0.0.1 --leader-elect=false --profiling=false --v=1"
            ;;
        containerd) echo "--config=$cfg/containerd.toml" ;;
        kubelet)
            echo "--config=$cfg/kubelet.yaml --kubeconfig=$K8S_STATE/kubelet.kubeconfig"
            echo "--root-dir=$K8S_STATE/kubelet --hostname-override=$NODE_NAME --node-ip=$NODE_IP --v=1"
            ;;
        kube-proxy) echo "--config=$cfg/kube-proxy.yaml --v=1" ;;
        kube-router)
            # Only the NetworkPolicy firewall: the router (BGP) and the service
            # proxy stay off; kube-proxy serves Services.
            echo "--run-firewall=true --run-router=false --run-service-proxy=false --enable-cni=false"
            echo "--kubeconfig=$K8S_STATE/kube-router.kubeconfig --hostname-override=$NODE_NAME"
            echo "--service-cluster-ip-range=$SERVICE_CIDR --metrics-port=0 --health-port=20244"
            echo "--iptables-sync-period=1m --v=1"
            ;;
        provisioner)
            echo "$K8S_DIR/provisioner.py --kubeconfig=$K8S_STATE/provisioner.kubeconfig --volumes=$K8S_STATE/volumes"
            echo "--node=$NODE_NAME --ready-file=$K8S_RUN/provisioner.ready"
            ;;
    esac
}

# ---- readiness ----------------------------------------------------------------

_curl_tls() {  # _curl_tls URL CERT: GET with the CA and a client cert, 2xx or fail
    curl -fsS --max-time 2 --cacert "$K8S_STATE/pki/ca.crt" \
        --cert "$K8S_STATE/pki/$2.crt" --key "$K8S_STATE/pki/$2.key" "$1"
}
ready_etcd() { _curl_tls "https://127.0.0.1:$ETCD_PORT/health" apiserver-etcd-client | grep -q '"health":"true"'; }
ready_kube-apiserver() { _curl_tls "https://$NODE_IP:$APISERVER_PORT/readyz" admin; }
ready_kube-controller-manager() { curl -fsSk --max-time 2 https://127.0.0.1:10257/healthz; }
ready_kube-scheduler() { curl -fsSk --max-time 2 https://127.0.0.1:10259/healthz; }
ready_containerd() { "${DEB_ROOT[containerd]}/usr/bin/ctr" --address "$CONTAINERD_SOCK" version; }
ready_kubelet() { curl -fsS --max-time 2 http://127.0.0.1:10248/healthz; }
ready_kube-proxy() { curl -fsS --max-time 2 http://127.0.0.1:10256/livez; }
ready_kube-router() { curl -fsS --max-time 2 http://127.0.0.1:20244/healthz; }
ready_provisioner() { [ -f "$K8S_RUN/provisioner.ready" ]; }

# ---- per-component preparation (config files, host set-up) ------------------

prepare_etcd() { mkdir -p "$K8S_STATE/etcd"; chmod 700 "$K8S_STATE/etcd"; }
prepare_kube-apiserver() { :; }
prepare_kube-controller-manager() { :; }
prepare_kube-scheduler() { :; }
prepare_kube-proxy() { :; }
prepare_kube-router() { :; }
prepare_provisioner() { rm -f "$K8S_RUN/provisioner.ready"; mkdir -p "$K8S_STATE/volumes"; }
prepare_containerd() { mkdir -p "$K8S_STATE/containerd" "$K8S_RUN/containerd"; }
prepare_kubelet() { mkdir -p "$K8S_STATE/kubelet"; }
