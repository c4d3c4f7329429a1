#!/usr/bin/env bash
# `make cluster-down`: stop everything `make cluster` started in this clone
# and remove what its pods left: their processes and cgroups, containerd's
# containers and snapshots, the kubelet's pod folders, network namespaces,
# logs and etcd's data (the next start is a fresh, empty cluster).
# Certificates and the images imported into containerd are kept, so the
# next `make cluster` is fast. Running it when nothing runs is fine.
set -euo pipefail
. "$(dirname "$0")/lib.sh"
need_root "$0" "$@"
lock_state

if [ ! -d "$STATE" ]; then
	log "no cluster state in $STATE: nothing to stop"
	exit 0
fi
ctr() { command ctr --address "$CONTAINERD_SOCK" --namespace k8s.io "$@"; }

# stop NAME SECONDS: SIGTERM the recorded process, SIGKILL it if it is
# still there after SECONDS.
stop() {
	local name=$1 secs=$2 pid i
	pid_alive "$name" || { rm -f "$PIDS/$name"; return 0; }
	pid=$(cat "$PIDS/$name")
	kill -TERM "$pid" 2>/dev/null || true
	for ((i = 0; i < secs * 10; i++)); do
		pid_alive "$name" || break
		sleep 0.1
	done
	if pid_alive "$name"; then
		log "$name ($pid) did not stop in ${secs}s: killing it"
		kill -KILL "$pid" 2>/dev/null || true
	fi
	rm -f "$PIDS/$name"
}

# pod_pids prints every process in the kubelet's cgroup parent: the pods'
# processes (pause and containers), and nothing else.
pod_pids() {
	local tree=/sys/fs/cgroup/pids$CGROUP_ROOT
	[ -d "$tree" ] || tree=/sys/fs/cgroup$CGROUP_ROOT
	[ -d "$tree" ] || return 0
	find "$tree" -name cgroup.procs -exec cat {} + 2>/dev/null | sort -u
}

# ns_pids prints the processes still in the node's private mount namespace
# but its holder (node.sh).
ns_pids() {
	local ns p holder
	ns=$(cat "$RUN/node.mntns" 2>/dev/null) || return 0
	[ -n "$ns" ] || return 0
	holder=$(cat "$PIDS/node-ns" 2>/dev/null) || true
	for p in /proc/[0-9]*; do
		[ "${p#/proc/}" != "$holder" ] || continue
		[ "$(readlink "$p/ns/mnt" 2>/dev/null)" = "$ns" ] && echo "${p#/proc/}"
	done
	return 0
}

# ns_ours succeeds while the namespace named in node.mntns is still the
# node's: its holder lives in it. Once the holder is gone the namespace
# may have ended and its id gone to another one (a container's).
ns_ours() {
	pid_alive node-ns && [ "$(readlink "/proc/$(cat "$PIDS/node-ns")/ns/mnt" 2>/dev/null)" = "$(cat "$RUN/node.mntns" 2>/dev/null)" ]
}

stopped=
[ -z "$(ls "$PIDS" 2>/dev/null)" ] || stopped=1

# 1. The kubelet first, so it restarts nothing.
stop kubelet 10

# 2. The pods: their tasks and containers through containerd while it
# runs, then whatever is left in their cgroups.
if pid_alive containerd && ctr version >/dev/null 2>&1; then
	for id in $(ctr tasks ls -q 2>/dev/null); do
		ctr tasks kill -s SIGKILL "$id" >/dev/null 2>&1 || true
	done
	for id in $(ctr containers ls -q 2>/dev/null); do
		ctr tasks delete -f "$id" >/dev/null 2>&1 || true
		ctr containers delete "$id" >/dev/null 2>&1 || true
	done
fi
for _ in 1 2 3 4 5; do
	pids=$(pod_pids)
	[ -n "$pids" ] || break
	# shellcheck disable=SC2086
	kill -KILL $pids 2>/dev/null || true
	sleep 0.2
done

# 3. containerd, then the shims it started (they outlive it by design);
# each shim's command line names this cluster's socket.
stop containerd 10
for p in /proc/[0-9]*; do
	if tr '\0' ' ' 2>/dev/null <"$p/cmdline" | grep -qF -- "-address $CONTAINERD_SOCK "; then
		kill -KILL "${p#/proc/}" 2>/dev/null || true
	fi
done

# 4. The control plane.
stop kube-scheduler 10
stop kube-controller-manager 10
stop kube-apiserver 15
stop etcd 10

# 5. Anything still holding the private mount namespace (it and all its
# mounts go away with its last process), its holder last. Without the
# holder (a crash, a cluster started before it had one) nothing is
# killed by namespace: the id may be another namespace's by now.
if ns_ours; then
	for _ in 1 2 3 4 5 6 7 8 9 10; do
		pids=$(ns_pids)
		[ -n "$pids" ] || break
		# shellcheck disable=SC2086
		kill -KILL $pids 2>/dev/null || true
		sleep 0.2
	done
	[ -z "$(ns_pids)" ] || die "processes still in the node's mount namespace: $(ns_pids | tr '\n' ' ')"
elif [ -n "$(ns_pids)" ]; then
	log "warning: the node's mount namespace has no holder; processes in a namespace of the same id were left alone (the id may have been reused): $(ns_pids | tr '\n' ' ')"
fi
stop node-ns 5

# 6. The pods' cgroups, deepest first.
for h in /sys/fs/cgroup/*"$CGROUP_ROOT" /sys/fs/cgroup"$CGROUP_ROOT"; do
	[ -d "$h" ] || continue
	find "$h" -depth -type d -exec rmdir {} + 2>/dev/null || true
	[ ! -d "$h" ] || log "warning: cgroup $h could not be removed"
done

# 7. The shared folder's bind mount (up.sh). What is mounted under it
# belongs to whoever mounted it (a server's workspace disks): stop that
# first.
if mountpoint -q "$SHARED"; then
	umount "$SHARED" 2>/dev/null ||
		die "$SHARED still has mounts under it (a server's workspace disks?): stop what uses them, then run this again"
fi

# 8. Files. The mounts made for pods lived in the node's namespace, now
# gone; refuse to delete anything if one is visible here after all.
if grep -qF " $STATE/" /proc/self/mountinfo; then
	die "mounts under $STATE are still present: $(grep -F " $STATE/" /proc/self/mountinfo | awk '{print $5}' | tr '\n' ' ')"
fi
rm -rf --one-file-system "$STATE/etcd" "$STATE/kubelet" "$STATE/pod-logs" "$STATE/containerd/state" \
	"$STATE/containerd/runc" "$STATE/containerd/opt" "$RUN" "$PIDS" "$STATE/node.started" "$KUBECONFIG_ADMIN"

if [ -n "$stopped" ]; then
	log "cluster stopped"
else
	log "the cluster was not running"
fi
