# Certificates, kubeconfigs and the configuration files of the local
# cluster (sourced by up.sh after lib.sh, paths.env and ports.env).

# Service IPs are only names here: there is no kube-proxy and pods have
# loopback only, so nothing is ever sent to this range.
SERVICE_CIDR="10.96.0.0/24"
SERVICE_IP="10.96.0.1"
NODE_NAME="localhost"

# sign NAME SUBJECT EXT: a P-256 key and a certificate signed by the CA,
# valid ten years, with the given extensions.
sign() {
	local name=$1 subj=$2 ext=$3
	openssl ecparam -name prime256v1 -genkey -noout -out "$PKI/$name.key" 2>/dev/null
	openssl req -new -key "$PKI/$name.key" -subj "$subj" -out "$PKI/$name.csr" 2>/dev/null
	printf 'basicConstraints=critical,CA:FALSE\nkeyUsage=critical,digitalSignature,keyEncipherment\n%s\n' "$ext" >"$PKI/$name.ext"
	openssl x509 -req -in "$PKI/$name.csr" -CA "$PKI/ca.crt" -CAkey "$PKI/ca.key" -set_serial "0x$(openssl rand -hex 16)" \
		-days 3650 -extfile "$PKI/$name.ext" -out "$PKI/$name.crt" 2>/dev/null
	rm -f "$PKI/$name.csr" "$PKI/$name.ext"
}

# make_pki creates the cluster's CA and every certificate once per clone;
# they survive `make cluster-down`, so kubeconfigs handed out stay valid.
make_pki() {
	[ -f "$PKI/.complete" ] && return
	log "creating certificates in $PKI"
	rm -rf "$PKI"
	mkdir -p "$PKI"
	chmod 700 "$PKI"
	openssl ecparam -name prime256v1 -genkey -noout -out "$PKI/ca.key" 2>/dev/null
	openssl req -x509 -new -key "$PKI/ca.key" -subj "/CN=agentbox-local-cluster-ca" -days 3650 \
		-addext "basicConstraints=critical,CA:TRUE" -addext "keyUsage=critical,keyCertSign,cRLSign" \
		-out "$PKI/ca.crt" 2>/dev/null
	local server=extendedKeyUsage=serverAuth client=extendedKeyUsage=clientAuth
	sign apiserver "/CN=kube-apiserver" \
		"$server
subjectAltName=DNS:localhost,DNS:kubernetes,DNS:kubernetes.default,DNS:kubernetes.default.svc,DNS:kubernetes.default.svc.cluster.local,IP:127.0.0.1,IP:$SERVICE_IP"
	sign etcd "/CN=etcd" "$server
subjectAltName=DNS:localhost,IP:127.0.0.1"
	sign apiserver-etcd-client "/CN=kube-apiserver-etcd-client" "$client"
	sign apiserver-kubelet-client "/O=system:masters/CN=kube-apiserver-kubelet-client" "$client"
	sign admin "/O=system:masters/CN=agentbox-admin" "$client"
	sign controller-manager "/CN=system:kube-controller-manager" "$client"
	sign scheduler "/CN=system:kube-scheduler" "$client"
	# One certificate for the kubelet as a client of the API server and as
	# the server the API server calls for exec and logs.
	sign kubelet "/O=system:nodes/CN=system:node:$NODE_NAME" "extendedKeyUsage=serverAuth,clientAuth
subjectAltName=DNS:$NODE_NAME,IP:127.0.0.1"
	# The service-account key pair: tokens signed by the API server and
	# checked by it; the controller-manager signs the legacy ones.
	openssl ecparam -name prime256v1 -genkey -noout -out "$PKI/sa.key" 2>/dev/null
	openssl ec -in "$PKI/sa.key" -pubout -out "$PKI/sa.pub" 2>/dev/null
	chmod 600 "$PKI"/*.key
	touch "$PKI/.complete"
}

# kubeconfig FILE USER: a self-contained kubeconfig (certificates inline)
# for the API server on this clone's port.
kubeconfig() {
	local file=$1 user=$2 tmp
	tmp="$file.tmp"
	cat >"$tmp" <<EOF
apiVersion: v1
kind: Config
clusters:
- name: agentbox-local
  cluster:
    server: https://127.0.0.1:$API_PORT
    certificate-authority-data: $(base64 -w0 "$PKI/ca.crt")
users:
- name: $user
  user:
    client-certificate-data: $(base64 -w0 "$PKI/$user.crt")
    client-key-data: $(base64 -w0 "$PKI/$user.key")
contexts:
- name: agentbox-local
  context:
    cluster: agentbox-local
    user: $user
current-context: agentbox-local
EOF
	chmod 600 "$tmp"
	mv "$tmp" "$file"
}

# write_configs writes the kubeconfigs and the containerd, CNI and kubelet
# configuration for this start (ports can change between starts).
write_configs() {
	mkdir -p "$STATE/etc" "$RUN" "$LOGS" "$PIDS"
	kubeconfig "$KUBECONFIG_ADMIN" admin
	kubeconfig "$STATE/etc/controller-manager.kubeconfig" controller-manager
	kubeconfig "$STATE/etc/scheduler.kubeconfig" scheduler
	kubeconfig "$STATE/etc/kubelet.kubeconfig" kubelet

	mkdir -p "$STATE/etc/cni"
	cat >"$STATE/etc/cni/10-agentbox.conflist" <<EOF
{
  "cniVersion": "1.0.0",
  "name": "agentbox-loopback",
  "plugins": [{"type": "cni-loopback"}]
}
EOF

	# Our own containerd: its own root, state, socket and CNI folders;
	# never Docker's instance. restrict_oom_score_adj: root lacks
	# CAP_SYS_RESOURCE on these hosts and runc fails writing a lower
	# oom_score_adj than its own.
	cat >"$STATE/etc/containerd.toml" <<EOF
version = 2
root = "$STATE/containerd/root"
state = "$STATE/containerd/state"
disabled_plugins = ["io.containerd.snapshotter.v1.aufs", "io.containerd.snapshotter.v1.btrfs", "io.containerd.snapshotter.v1.devmapper", "io.containerd.snapshotter.v1.zfs", "io.containerd.internal.v1.tracing", "io.containerd.tracing.processor.v1.otlp"]

[grpc]
  address = "$CONTAINERD_SOCK"
[ttrpc]
  address = "$CONTAINERD_SOCK.ttrpc"
[debug]
  address = ""
[metrics]
  address = ""

[plugins."io.containerd.internal.v1.opt"]
  path = "$STATE/containerd/opt"
[plugins."io.containerd.grpc.v1.cri"]
  sandbox_image = "$PAUSE_IMAGE"
  restrict_oom_score_adj = true
  netns_mounts_under_state_dir = true
  stream_server_address = "127.0.0.1"
  stream_server_port = "0"
  enable_selinux = false
  [plugins."io.containerd.grpc.v1.cri".cni]
    bin_dir = "$CNI_BIN"
    conf_dir = "$STATE/etc/cni"
    max_conf_num = 1
  [plugins."io.containerd.grpc.v1.cri".containerd]
    snapshotter = "overlayfs"
    default_runtime_name = "runc"
    [plugins."io.containerd.grpc.v1.cri".containerd.runtimes.runc]
      runtime_type = "io.containerd.runc.v2"
      [plugins."io.containerd.grpc.v1.cri".containerd.runtimes.runc.options]
        BinaryName = "$(command -v runc)"
        Root = "$STATE/containerd/runc"
        SystemdCgroup = false
EOF

	cat >"$STATE/etc/kubelet.yaml" <<EOF
apiVersion: kubelet.config.k8s.io/v1beta1
kind: KubeletConfiguration
address: 127.0.0.1
port: $KUBELET_PORT
readOnlyPort: 0
healthzPort: 0
tlsCertFile: $PKI/kubelet.crt
tlsPrivateKeyFile: $PKI/kubelet.key
authentication:
  anonymous:
    enabled: false
  webhook:
    enabled: true
  x509:
    clientCAFile: $PKI/ca.crt
authorization:
  mode: Webhook
containerRuntimeEndpoint: unix://$CONTAINERD_SOCK
cgroupDriver: cgroupfs
cgroupRoot: $CGROUP_ROOT
failSwapOn: false
podLogsDir: $STATE/pod-logs
# Pods get the same process limit as the Docker runtime's containers.
podPidsLimit: 512
maxPods: 110
makeIPTablesUtilChains: false
serializeImagePulls: false
imageGCHighThresholdPercent: 100
imageGCLowThresholdPercent: 99
evictionHard:
  memory.available: "50Mi"
  nodefs.available: "1%"
  nodefs.inodesFree: "1%"
  imagefs.available: "1%"
evictionPressureTransitionPeriod: 10s
nodeStatusReportFrequency: 1m
shutdownGracePeriod: 0s
EOF
}
