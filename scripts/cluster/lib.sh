# Shared settings of the local cluster scripts (sourced, not run).
#
# Two places hold the cluster:
#   $AGENTBOX_CACHE/k8s-KEY      built binaries, keyed by their inputs and
#                                shared by every clone on the machine
#   .cache/cluster (the clone's) certificates, kubeconfigs, etcd data,
#                                containerd's root and state, logs, pids
. "$(dirname "${BASH_SOURCE[0]}")/../common.sh"

K8S_VERSION="v1.34.4"
# Debian's etcd-server (3.4.x) and containerd (1.6.x) are what bookworm has.
ETCD_PACKAGE="etcd-server"

CLUSTER_SRC="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
REPO_ROOT="$(cd "$CLUSTER_SRC/../.." && pwd)"
STATE="${AGENTBOX_CLUSTER_STATE:-$REPO_ROOT/.cache/cluster}"

# The commands built from the wrapper module, and how.
K8S_CMDS="kube-apiserver kube-controller-manager kube-scheduler kubelet kubectl"
k8s_ldflags() {
	local v=${K8S_VERSION#v} pkg
	local major=${v%%.*} rest=${v#*.}
	local minor=${rest%%.*}
	printf -- '-s -w'
	for pkg in k8s.io/component-base/version k8s.io/client-go/pkg/version; do
		printf -- ' -X %s.gitVersion=%s -X %s.gitMajor=%s -X %s.gitMinor=%s -X %s.gitTreeState=clean' \
			"$pkg" "$K8S_VERSION" "$pkg" "$major" "$pkg" "$minor" "$pkg"
	done
}
K8S_GOFLAGS="-trimpath -mod=readonly -buildvcs=false"

# k8s_key hashes every input of the Kubernetes build.
k8s_key() {
	key_of "k8s $K8S_VERSION $(go env GOVERSION GOOS GOARCH) CGO_ENABLED=0 $K8S_GOFLAGS $(k8s_ldflags) $K8S_CMDS" \
		"$(cat "$CLUSTER_SRC/go.mod" "$CLUSTER_SRC/go.sum" "$CLUSTER_SRC/tools.go")"
}
cni_key() {
	key_of "cni loopback+cni-loopback $(go env GOVERSION GOOS GOARCH) $K8S_GOFLAGS" \
		"$(cat "$CLUSTER_SRC/go.mod" "$CLUSTER_SRC/go.sum" "$CLUSTER_SRC/cni-loopback/"*.go)"
}
pause_key() { key_of "pause $(gcc -dumpfullversion 2>/dev/null) $(uname -m)" "$(cat "$CLUSTER_SRC/pause.c")"; }

# Per-clone names: the cgroup parent and the ports derive from the state
# folder, so clusters of two clones can run side by side.
clone_id() { key_of "$STATE" | cut -c1-8; }
CGROUP_ROOT="/agentbox-$(clone_id)"

# Every process the cluster runs, in start order (pids/NAME).
COMPONENTS="etcd kube-apiserver kube-controller-manager kube-scheduler containerd kubelet"

# The state folder's layout.
PKI="$STATE/pki"
LOGS="$STATE/logs"
PIDS="$STATE/pids"
RUN="$STATE/run"
CONTAINERD_SOCK="$RUN/containerd.sock"
KUBECONFIG_ADMIN="$STATE/kubeconfig"
# Mounts made on the host under SHARED after the node started (workspace
# disk images, loop-mounted by a server) reach the node: a shared bind
# mount of its own, of which the node's copy is a slave.
SHARED="$STATE/shared"

# bin_dir prints where the cluster's binaries are (built by build.sh);
# .cache/cluster/bin links there once the cluster has been built.
bin_dir() { readlink -f "$STATE/bin" 2>/dev/null || true; }

# pid_alive NAME succeeds when the process recorded for NAME still runs
# (every component's command line names the state folder, so a recycled
# pid is not mistaken for it).
pid_alive() {
	local pid
	pid=$(cat "$PIDS/$1" 2>/dev/null) || return 1
	[ -n "$pid" ] && tr '\0' ' ' 2>/dev/null <"/proc/$pid/cmdline" | grep -qF -- "$STATE/"
}

# lock_state takes this clone's cluster lock (held until the script exits)
# unless the calling script holds it already: starts and stops of one
# clone's cluster never overlap.
lock_state() {
	[ -z "${AGENTBOX_CLUSTER_LOCKED:-}" ] || return 0
	mkdir -p "$(dirname "$STATE")"
	exec 8>"$STATE.lock"
	command -v flock >/dev/null 2>&1 && flock 8
	export AGENTBOX_CLUSTER_LOCKED=1
}

# need_root re-runs the calling script as root.
need_root() {
	if [ "$(id -u)" != 0 ]; then
		command -v sudo >/dev/null 2>&1 || die "the local cluster needs root (mounts, cgroups, containerd): run as root or install sudo"
		exec sudo -E "$@"
	fi
}
