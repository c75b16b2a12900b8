# shellcheck shell=bash
# The configuration files the components read, written into
# $K8S_STATE/config on every `up` (they hold paths into the cache, which a
# rebuild may move). Needs lib/common.sh, DEB_ROOT, TOOLS.

# write_if_changed FILE < CONTENT: replace FILE only when CONTENT differs, by
# rename. kube-proxy exits when its configuration file changes under it, so a
# rewrite of the same content must not touch it.
write_if_changed() {
    local tmp="$1.tmp.$$"
    cat >"$tmp"
    if cmp -s "$tmp" "$1"; then rm -f "$tmp"; else mv -f "$tmp" "$1"; fi
}

write_configs() {
    local cfg="$K8S_STATE/config"
    mkdir -p "$cfg" "$cfg/cni" "$cfg/certs.d/_default" "$K8S_RUN/cni-ipam"

    # containerd: a second instance beside Docker's, sharing nothing with it:
    # its own socket, root, state, runc root and plugin folders, no metrics or
    # debug listener. Images are never pulled from anywhere: every registry
    # resolves to a closed local port (refused at once), so a missing image
    # fails fast instead of hanging; the cluster's images are imported.
    write_if_changed "$cfg/containerd.toml" <<EOF
version = 2
root = "$K8S_STATE/containerd"
state = "$K8S_RUN/containerd"
plugin_dir = ""
disabled_plugins = ["io.containerd.snapshotter.v1.btrfs", "io.containerd.snapshotter.v1.zfs", "io.containerd.snapshotter.v1.devmapper", "io.containerd.snapshotter.v1.aufs"]

[grpc]
  address = "$CONTAINERD_SOCK"
[ttrpc]
  address = "$CONTAINERD_SOCK.ttrpc"
[debug]
  address = ""
[metrics]
  address = ""

[plugins."io.containerd.internal.v1.opt"]
  path = "$K8S_STATE/containerd-opt"

[plugins."io.containerd.grpc.v1.cri"]
  sandbox_image = "$PAUSE_IMAGE"
  enable_selinux = false
  netns_mounts_under_state_dir = true
  enable_unprivileged_ports = false
  enable_unprivileged_icmp = false
  # Root here lacks CAP_SYS_RESOURCE, so no process may lower its
  # oom_score_adj: runc would fail to start every Pod sandbox (-998) and
  # Guaranteed container (-997). Clamped to containerd's own score instead.
  restrict_oom_score_adj = true
  [plugins."io.containerd.grpc.v1.cri".containerd]
    snapshotter = "overlayfs"
    default_runtime_name = "runc"
    discard_unpacked_layers = false
    [plugins."io.containerd.grpc.v1.cri".containerd.runtimes.runc]
      runtime_type = "io.containerd.runc.v2"
      [plugins."io.containerd.grpc.v1.cri".containerd.runtimes.runc.options]
        BinaryName = "${DEB_ROOT[runc]}/usr/sbin/runc"
        Root = "$K8S_RUN/runc"
        SystemdCgroup = false
    [plugins."io.containerd.grpc.v1.cri".containerd.runtimes.runsc]
      runtime_type = "io.containerd.runsc.v1"
      runtime_path = "$TOOLS/gvisor-shim/containerd-shim-runsc-v1"
      pod_annotations = ["dev.gvisor.*"]
      [plugins."io.containerd.grpc.v1.cri".containerd.runtimes.runsc.options]
        TypeUrl = "io.containerd.runsc.v1.options"
        ConfigPath = "$cfg/runsc.toml"
  [plugins."io.containerd.grpc.v1.cri".cni]
    bin_dir = "${DEB_ROOT[containernetworking-plugins]}/usr/lib/cni"
    conf_dir = "$cfg/cni"
    max_conf_num = 1
  [plugins."io.containerd.grpc.v1.cri".registry]
    config_path = "$cfg/certs.d"
EOF
    write_if_changed "$cfg/certs.d/_default/hosts.toml" <<'EOF'
# No registry: every pull is refused at once (port 1 on loopback is closed).
server = "http://127.0.0.1:1"
[host."http://127.0.0.1:1"]
  capabilities = ["pull", "resolve"]
EOF

    # gVisor's shim: runsc from Debian (the same snapshot the Docker set-up
    # uses) with the flags scripts/register-gvisor.sh gives Docker: ptrace,
    # and no network. --network=sandbox cannot work on this kernel: runsc
    # 20240729 takes "/proc/sys/net/core/rmem_default exists" to mean "root
    # network namespace" and refuses, but since Linux 6.x that file exists
    # in every namespace (this host runs 6.18). A gVisor Pod has loopback only.
    write_if_changed "$cfg/runsc.toml" <<EOF
binary_name = "${DEB_ROOT[runsc]}/usr/bin/runsc"
root = "$K8S_RUN/runsc"
[runsc_config]
  platform = "${SANDBOXD_GVISOR_PLATFORM:-ptrace}"
  network = "none"
EOF

    # One bridge for the Pods; host-local addresses kept under $K8S_RUN (they
    # mean nothing once the Pods' network namespaces are gone).
    write_if_changed "$cfg/cni/10-sandboxd-k8s.conflist" <<EOF
{
  "cniVersion": "1.0.0",
  "name": "sandboxd-k8s",
  "plugins": [
    {
      "type": "bridge",
      "bridge": "$POD_BRIDGE",
      "isGateway": true,
      "ipMasq": true,
      "hairpinMode": true,
      "ipam": {
        "type": "host-local",
        "ranges": [[{"subnet": "$POD_CIDR"}]],
        "routes": [{"dst": "0.0.0.0/0"}],
        "dataDir": "$K8S_RUN/cni-ipam"
      }
    },
    {"type": "portmap", "capabilities": {"portMappings": true}}
  ]
}
EOF

    # The kubelet: cgroupfs (no systemd), cgroup v1 accepted explicitly
    # (this version still defaults to it; 1.35 refuses v1 unless told),
    # authenticated and authorized through the API server, serving with its
    # own certificate on the node address only, no image garbage collection
    # (an image removed here could never be pulled back).
    write_if_changed "$cfg/kubelet.yaml" <<EOF
apiVersion: kubelet.config.k8s.io/v1beta1
kind: KubeletConfiguration
cgroupDriver: cgroupfs
failCgroupV1: false
containerRuntimeEndpoint: unix://$CONTAINERD_SOCK
address: $NODE_IP
port: 10250
readOnlyPort: 0
healthzBindAddress: 127.0.0.1
healthzPort: 10248
tlsCertFile: $K8S_STATE/pki/kubelet-server.crt
tlsPrivateKeyFile: $K8S_STATE/pki/kubelet-server.key
authentication:
  anonymous: {enabled: false}
  webhook: {enabled: true}
  x509: {clientCAFile: $K8S_STATE/pki/ca.crt}
authorization:
  mode: Webhook
clusterDomain: cluster.local
resolvConf: /etc/resolv.conf
imageGCHighThresholdPercent: 100
imageGCLowThresholdPercent: 99
evictionHard:
  memory.available: 100Mi
  nodefs.available: 2%
  imagefs.available: 2%
  nodefs.inodesFree: 2%
failSwapOn: true
serializeImagePulls: false
rotateCertificates: false
serverTLSBootstrap: false
podPidsLimit: -1
maxPods: 110
EOF

    write_if_changed "$cfg/kube-proxy.yaml" <<EOF
apiVersion: kubeproxy.config.k8s.io/v1alpha1
kind: KubeProxyConfiguration
mode: iptables
clientConnection:
  kubeconfig: $K8S_STATE/kube-proxy.kubeconfig
hostnameOverride: $NODE_NAME
clusterCIDR: $POD_CIDR
bindAddress: $NODE_IP
healthzBindAddress: 127.0.0.1:10256
metricsBindAddress: 127.0.0.1:10249
# Zero leaves the host's conntrack sysctls as they are (it is shared).
conntrack:
  maxPerCore: 0
  tcpEstablishedTimeout: 0s
  tcpCloseWaitTimeout: 0s
iptables:
  localhostNodePorts: false
EOF
}
