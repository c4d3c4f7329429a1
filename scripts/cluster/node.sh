#!/usr/bin/env bash
# The node half of the local cluster, run by up.sh inside
# `unshare --mount --propagation slave`: it prepares the private mounts,
# starts containerd and the kubelet detached (they keep the namespace
# alive), and returns.
#
# Inside this namespace only:
#   - tmpfs over /run/containerd (shim sockets) and /var/log (the kubelet's
#     /var/log/containers links), so nothing of them lands on the host;
#   - a file bind-mounted over each /proc/sys entry the kubelet sets
#     (kernel.panic, kernel.panic_on_oops, vm.overcommit_memory, ...), so
#     its writes change that file, never the host's sysctls.
set -euo pipefail
. "$(dirname "$0")/lib.sh"
. "$STATE/paths.env"
. "$STATE/ports.env"
. "$CLUSTER_SRC/config.sh"

[ "$(readlink /proc/self/ns/mnt)" != "$(readlink /proc/1/ns/mnt)" ] ||
	die "node.sh must run in a private mount namespace (up.sh starts it with unshare)"

mkdir -p "$RUN"
readlink /proc/self/ns/mnt >"$RUN/node.mntns"
# A process that only holds the namespace: while it lives, the namespace
# named in node.mntns is this node's (the kernel gives a freed
# namespace's id to new ones), which down.sh checks before it kills what
# is in it. Its command line names the state folder (pid_alive).
setsid bash -c 'exec -a "agentbox-node-ns $0" sleep infinity' "$RUN/" </dev/null >/dev/null 2>&1 &
echo $! >"$PIDS/node-ns"
mkdir -p /run/containerd
mount -t tmpfs -o mode=0711,size=64m agentbox-run /run/containerd
mount -t tmpfs -o mode=0755,size=64m agentbox-log /var/log

mkdir -p "$RUN/sysctl"
for key in kernel/panic kernel/panic_on_oops vm/overcommit_memory vm/panic_on_oom kernel/keys/root_maxkeys kernel/keys/root_maxbytes; do
	[ -e "/proc/sys/$key" ] || continue
	f="$RUN/sysctl/${key//\//.}"
	cat "/proc/sys/$key" >"$f"
	mount --bind "$f" "/proc/sys/$key"
done

# The kubelet's cgroup parent, in every cgroup v1 hierarchy (cgroup v2:
# the one tree). cpuset needs its cpus and mems filled before use.
for h in /sys/fs/cgroup/*/ /sys/fs/cgroup/; do
	[ -d "$h" ] || continue
	case "$h" in /sys/fs/cgroup/ ) [ -f /sys/fs/cgroup/cgroup.controllers ] || continue ;; esac
	mkdir -p "$h${CGROUP_ROOT#/}"
done
if [ -f /sys/fs/cgroup/cpuset/cpuset.cpus ]; then
	cat /sys/fs/cgroup/cpuset/cpuset.cpus >"/sys/fs/cgroup/cpuset$CGROUP_ROOT/cpuset.cpus"
	cat /sys/fs/cgroup/cpuset/cpuset.mems >"/sys/fs/cgroup/cpuset$CGROUP_ROOT/cpuset.mems"
fi

mkdir -p "$STATE/containerd" "$STATE/kubelet" "$STATE/pod-logs"
setsid containerd --config "$STATE/etc/containerd.toml" </dev/null >"$LOGS/containerd.log" 2>&1 &
echo $! >"$PIDS/containerd"
ctr() { command ctr --address "$CONTAINERD_SOCK" --namespace k8s.io "$@"; }
for ((i = 0; i < 150; i++)); do
	ctr version >/dev/null 2>&1 && break
	[ -d "/proc/$(cat "$PIDS/containerd")" ] || { tail -n 20 "$LOGS/containerd.log" >&2; die "containerd exited (log: $LOGS/containerd.log)"; }
	sleep 0.2
done
ctr version >/dev/null 2>&1 || die "containerd did not answer on $CONTAINERD_SOCK (log: $LOGS/containerd.log)"

# Containers a crash left behind (down.sh removes them when containerd
# answers): the kubelet starts from an empty node.
for id in $(ctr containers ls -q); do
	ctr tasks delete -f "$id" >/dev/null 2>&1 || true
	ctr containers delete "$id" >/dev/null 2>&1 || true
done

if [ -z "$(ctr images ls -q "name==$PAUSE_IMAGE")" ]; then
	ctr images import "$PAUSE_TAR" >/dev/null || die "importing the pause image failed"
fi
# Pinned, as the CRI pins the sandbox image it pulls itself: the kubelet's
# image garbage collection (a disk nearly full) never removes it, which
# would leave every new pod unable to start.
ctr images label "$PAUSE_IMAGE" io.cri-containerd.pinned=pinned >/dev/null || die "pinning the pause image failed"

setsid "$K8S_BIN/kubelet" --config "$STATE/etc/kubelet.yaml" --kubeconfig "$STATE/etc/kubelet.kubeconfig" \
	--hostname-override "$NODE_NAME" --root-dir "$STATE/kubelet" --cert-dir "$STATE/kubelet/pki" --v 1 \
	</dev/null >"$LOGS/kubelet.log" 2>&1 &
echo $! >"$PIDS/kubelet"
