# shellcheck shell=bash
# The cluster's PKI, made with openssl: one CA signs every serving and client
# certificate (EC P-256, ten years: a test cluster, rebuilt by `purge`).
# Identities are the ones Kubernetes' built-in RBAC roles and the Node
# authorizer expect (system:node:<name> in system:nodes, system:kube-*).
# Needs lib/common.sh and lib/net.sh (addresses).

PKI="$K8S_STATE/pki"

_pki_key() { [ -f "$1" ] || openssl genpkey -algorithm EC -pkeyopt ec_paramgen_curve:P-256 -out "$1" 2>/dev/null; chmod 600 "$1"; }

# pki_cert NAME SUBJECT USAGE [SAN]: $PKI/NAME.{key,crt} signed by the CA.
# USAGE is serverAuth, clientAuth or both ("serverAuth,clientAuth").
pki_cert() {
    local name="$1" subject="$2" usage="$3" san="${4:-}" ext
    [ -f "$PKI/$name.crt" ] && return 0
    _pki_key "$PKI/$name.key"
    ext="$(mktemp)"
    {
        echo "basicConstraints=critical,CA:FALSE"
        echo "keyUsage=critical,digitalSignature,keyEncipherment"
        echo "extendedKeyUsage=$usage"
        [ -z "$san" ] || echo "subjectAltName=$san"
    } >"$ext"
    openssl req -new -key "$PKI/$name.key" -subj "$subject" -out "$PKI/$name.csr" 2>/dev/null
    openssl x509 -req -in "$PKI/$name.csr" -CA "$PKI/ca.crt" -CAkey "$PKI/ca.key" -CAcreateserial \
        -days 3650 -sha256 -extfile "$ext" -out "$PKI/$name.crt.tmp" 2>/dev/null
    mv "$PKI/$name.crt.tmp" "$PKI/$name.crt"
    rm -f "$ext" "$PKI/$name.csr"
}

# kubeconfig NAME CERT: $K8S_STATE/NAME.kubeconfig for the client cert $PKI/CERT.
kubeconfig() {
    local name="$1" cert="$2" out="$K8S_STATE/$1.kubeconfig"
    [ -f "$out" ] && return 0
    cat >"$out.tmp" <<KCFG
apiVersion: v1
kind: Config
clusters:
- name: sandboxd-k8s
  cluster:
    server: https://$NODE_IP:$APISERVER_PORT
    certificate-authority-data: $(base64 -w0 <"$PKI/ca.crt")
users:
- name: $name
  user:
    client-certificate-data: $(base64 -w0 <"$PKI/$cert.crt")
    client-key-data: $(base64 -w0 <"$PKI/$cert.key")
contexts:
- name: sandboxd-k8s
  context: {cluster: sandboxd-k8s, user: $name}
current-context: sandboxd-k8s
KCFG
    chmod 600 "$out.tmp"
    mv "$out.tmp" "$out"
}

pki_ensure() {
    mkdir -p "$PKI"
    chmod 700 "$PKI"
    if [ ! -f "$PKI/ca.crt" ]; then
        _pki_key "$PKI/ca.key"
        openssl req -x509 -new -key "$PKI/ca.key" -subj "/CN=sandboxd-k8s-ca" -days 3650 -sha256 \
            -addext "basicConstraints=critical,CA:TRUE" -addext "keyUsage=critical,keyCertSign,cRLSign" \
            -out "$PKI/ca.crt" 2>/dev/null
    fi
    local svc_ip
    svc_ip="$(service_ip 1)"
    pki_cert etcd-server "/CN=sandboxd-k8s-etcd" serverAuth,clientAuth "IP:127.0.0.1,DNS:localhost"
    pki_cert apiserver-etcd-client "/CN=kube-apiserver-etcd-client" clientAuth
    pki_cert apiserver "/CN=kube-apiserver" serverAuth \
        "IP:$NODE_IP,IP:$svc_ip,IP:127.0.0.1,DNS:localhost,DNS:kubernetes,DNS:kubernetes.default,DNS:kubernetes.default.svc,DNS:kubernetes.default.svc.cluster.local"
    # The API server's identity towards the kubelet (exec, attach, port-forward, logs).
    pki_cert apiserver-kubelet-client "/CN=kube-apiserver-kubelet-client" clientAuth
    pki_cert kubelet-server "/CN=$NODE_NAME" serverAuth "IP:$NODE_IP,DNS:$NODE_NAME"
    pki_cert kubelet "/O=system:nodes/CN=system:node:$NODE_NAME" clientAuth
    pki_cert controller-manager "/CN=system:kube-controller-manager" clientAuth
    pki_cert scheduler "/CN=system:kube-scheduler" clientAuth
    pki_cert kube-proxy "/CN=system:kube-proxy" clientAuth
    pki_cert kube-router "/CN=system:sandboxd-k8s:kube-router" clientAuth
    pki_cert provisioner "/CN=system:sandboxd-k8s:provisioner" clientAuth
    pki_cert admin "/O=system:masters/CN=sandboxd-k8s-admin" clientAuth
    [ -f "$PKI/sa.key" ] || _pki_key "$PKI/sa.key"
    [ -f "$PKI/sa.pub" ] || openssl pkey -in "$PKI/sa.key" -pubout -out "$PKI/sa.pub" 2>/dev/null

    kubeconfig admin admin
    kubeconfig kubelet kubelet
    kubeconfig controller-manager controller-manager
    kubeconfig scheduler scheduler
    kubeconfig kube-proxy kube-proxy
    kubeconfig kube-router kube-router
    kubeconfig provisioner provisioner
}
