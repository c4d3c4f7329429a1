#!/usr/bin/env bash
# `make cluster`: start the local single-node Kubernetes cluster of this
# clone, import the sandbox images into it, and print the path of its
# admin kubeconfig (.cache/cluster/kubeconfig) on stdout.
#
# etcd, kube-apiserver, kube-controller-manager and kube-scheduler run on
# 127.0.0.1 in the host's namespaces; containerd and the kubelet run in a
# private mount namespace (node.sh), so the sysctls the kubelet writes and
# the mounts they make never reach the host. A running cluster is left as
# it is (images are still brought up to date); a partly running one is
# stopped and started again.
#
# Environment:
#   AGENTBOX_CLUSTER_IMAGES  Docker images to import (space-separated;
#                            default agentbox/sandbox-claude:latest)
#   AGENTBOX_CLUSTER_STATE   state folder (default .cache/cluster)
#   AGENTBOX_CACHE           build cache (default ~/.cache/agentbox)
set -euo pipefail
. "$(dirname "$0")/lib.sh"
need_root "$0" "$@"
lock_state
export PATH="$PATH:/usr/local/go/bin"
IMAGES="${AGENTBOX_CLUSTER_IMAGES-agentbox/sandbox-claude:latest}"

"$CLUSTER_SRC/build.sh"
. "$STATE/paths.env"
. "$CLUSTER_SRC/config.sh"
kubectl() { "$K8S_BIN/kubectl" --kubeconfig "$KUBECONFIG_ADMIN" "$@"; }
ctr() { command ctr --address "$CONTAINERD_SOCK" --namespace k8s.io "$@"; }

# Unix socket paths are limited to 107 bytes.
[ ${#CONTAINERD_SOCK} -le 100 ] || die "state folder path too long for containerd's socket ($CONTAINERD_SOCK); set AGENTBOX_CLUSTER_STATE to a shorter path"

# wait_for WHAT SECONDS LOG CMD...: retry CMD until it succeeds; fail
# showing the end of LOG after SECONDS, or at once with the log of a
# component that exited.
wait_for() {
	local what=$1 secs=$2 logf=$3 end=$((SECONDS + $2)) c
	shift 3
	while ((SECONDS < end)); do
		if "$@" >/dev/null 2>&1; then return 0; fi
		for c in $COMPONENTS; do
			if [ -f "$PIDS/$c" ] && ! pid_alive "$c"; then
				tail -n 25 "$LOGS/$c.log" >&2
				die "$c exited while waiting for $what (log: $LOGS/$c.log)"
			fi
		done
		sleep 0.2
	done
	[ -z "$logf" ] || tail -n 25 "$logf" >&2
	die "$what not ready after ${secs}s${logf:+ (log: $logf)}"
}

# start NAME CMD...: run CMD detached (own session, no terminal, not
# holding the state lock), logging to logs/NAME.log, and record its pid.
start() {
	local name=$1
	shift
	setsid "$@" </dev/null >"$LOGS/$name.log" 2>&1 8>&- &
	echo $! >"$PIDS/$name"
}

port_free() { [ -z "$(ss -Hltn "sport = :$1" 2>/dev/null)" ]; }

# choose_ports picks four consecutive free loopback ports, starting from a
# block derived from the state folder, and keeps them while they stay free.
choose_ports() {
	local base tries p ok
	if [ -f "$STATE/ports.env" ]; then
		. "$STATE/ports.env"
		if port_free "$ETCD_PORT" && port_free "$ETCD_PEER_PORT" && port_free "$API_PORT" && port_free "$KUBELET_PORT"; then
			return
		fi
	fi
	base=$((20000 + (16#$(clone_id) % 900) * 10))
	for ((tries = 0; tries < 100; tries++)); do
		ok=1
		for p in $base $((base + 1)) $((base + 2)) $((base + 3)); do
			port_free "$p" || ok=
		done
		if [ -n "$ok" ]; then
			printf 'ETCD_PORT=%s\nETCD_PEER_PORT=%s\nAPI_PORT=%s\nKUBELET_PORT=%s\n' \
				"$base" $((base + 1)) $((base + 2)) $((base + 3)) >"$STATE/ports.env"
			. "$STATE/ports.env"
			return
		fi
		base=$((20000 + ((base - 20000) / 10 + 1) % 900 * 10))
	done
	die "no four free consecutive ports found in 20000-28999 on 127.0.0.1"
}

# image_ref prints the name containerd stores a Docker image name under.
image_ref() {
	local ref=$1 first=${1%%/*}
	if [[ $ref != */* ]]; then
		ref="docker.io/library/$ref"
	elif [[ $first != *.* && $first != *:* && $first != localhost ]]; then
		ref="docker.io/$ref"
	fi
	[[ ${ref##*/} == *:* || $ref == *@* ]] || ref="$ref:latest"
	echo "$ref"
}

# import_images copies each Docker image into the cluster's containerd,
# unless the same image id was imported before (a label on the image).
import_images() {
	local img id ref start
	for img in $IMAGES; do
		id=$(timeout 20 docker image inspect --format '{{.Id}}' "$img" 2>/dev/null) ||
			die "image $img is not in Docker: build it first (make image), or leave it out of AGENTBOX_CLUSTER_IMAGES"
		ref=$(image_ref "$img")
		if [ -n "$(ctr images ls -q "name==$ref,labels.\"dev.agentbox.image.id\"==$id")" ]; then
			log "image $img ($id) already in the cluster"
			continue
		fi
		start=$(date +%s)
		log "importing $img into the cluster (docker save | ctr import)"
		docker save "$img" | ctr images import - >"$LOGS/import.log" 2>&1 ||
			{ tail -n 5 "$LOGS/import.log" >&2; die "importing $img failed"; }
		ctr images label "$ref" "dev.agentbox.image.id=$id" >/dev/null
		log "imported $img in $(($(date +%s) - start)) s"
	done
}

cluster_ready() {
	kubectl get --raw /readyz >/dev/null 2>&1 &&
		[ "$(kubectl get node "$NODE_NAME" -o jsonpath='{.status.conditions[?(@.type=="Ready")].status}' 2>/dev/null)" = True ]
}

if "$CLUSTER_SRC/status.sh"; then
	log "the cluster is already up"
	import_images
	echo "$KUBECONFIG_ADMIN"
	exit 0
fi
if [ -n "$(ls "$PIDS" 2>/dev/null)" ] || [ -e "$STATE/node.started" ]; then
	log "the cluster is partly up or was not stopped cleanly: stopping it first"
	"$CLUSTER_SRC/down.sh"
fi
# A failed start leaves nothing running (the logs stay for a look).
trap 'rc=$?; if [ $rc != 0 ]; then log "start failed: stopping what was started"; "$CLUSTER_SRC/down.sh" >/dev/null 2>&1 || true; fi' EXIT

t0=$(date +%s%N)
mkdir -p "$STATE"
choose_ports
make_pki
write_configs

# --- control plane -------------------------------------------------------
log "starting etcd on 127.0.0.1:$ETCD_PORT"
start etcd "$ETCD" --name agentbox --data-dir "$STATE/etcd" \
	--listen-client-urls "https://127.0.0.1:$ETCD_PORT" --advertise-client-urls "https://127.0.0.1:$ETCD_PORT" \
	--listen-peer-urls "https://127.0.0.1:$ETCD_PEER_PORT" --initial-advertise-peer-urls "https://127.0.0.1:$ETCD_PEER_PORT" \
	--initial-cluster "agentbox=https://127.0.0.1:$ETCD_PEER_PORT" \
	--cert-file "$PKI/etcd.crt" --key-file "$PKI/etcd.key" --client-cert-auth --trusted-ca-file "$PKI/ca.crt" \
	--peer-cert-file "$PKI/etcd.crt" --peer-key-file "$PKI/etcd.key" --peer-client-cert-auth --peer-trusted-ca-file "$PKI/ca.crt" \
	--listen-metrics-urls "" --unsafe-no-fsync --logger zap --log-level warn
wait_for etcd 30 "$LOGS/etcd.log" bash -c "[ -n \"\$(ss -Hltn 'sport = :$ETCD_PORT')\" ]"

log "starting kube-apiserver on 127.0.0.1:$API_PORT"
start kube-apiserver "$K8S_BIN/kube-apiserver" \
	--bind-address 127.0.0.1 --advertise-address 127.0.0.1 --secure-port "$API_PORT" \
	--etcd-servers "https://127.0.0.1:$ETCD_PORT" --etcd-cafile "$PKI/ca.crt" \
	--etcd-certfile "$PKI/apiserver-etcd-client.crt" --etcd-keyfile "$PKI/apiserver-etcd-client.key" \
	--tls-cert-file "$PKI/apiserver.crt" --tls-private-key-file "$PKI/apiserver.key" --client-ca-file "$PKI/ca.crt" \
	--kubelet-client-certificate "$PKI/apiserver-kubelet-client.crt" --kubelet-client-key "$PKI/apiserver-kubelet-client.key" \
	--kubelet-certificate-authority "$PKI/ca.crt" --kubelet-preferred-address-types Hostname \
	--service-account-issuer https://kubernetes.default.svc.cluster.local \
	--service-account-key-file "$PKI/sa.pub" --service-account-signing-key-file "$PKI/sa.key" \
	--service-cluster-ip-range "$SERVICE_CIDR" \
	--authorization-mode Node,RBAC --enable-admission-plugins NodeRestriction \
	--profiling=false --v 1

# --- node ----------------------------------------------------------------
# Started while the API server comes up: the kubelet retries until it
# answers.
log "starting containerd and the kubelet in a private mount namespace"
touch "$STATE/node.started"
# The node's namespace receives the host's mounts made later under shared
# mounts (SHARED, and on hosts whose / is shared every path) and gives
# back none of its own.
mkdir -p "$SHARED"
mountpoint -q "$SHARED" || mount --bind "$SHARED" "$SHARED"
mount --make-shared "$SHARED"
unshare --mount --propagation slave "$CLUSTER_SRC/node.sh" 8>&- ||
	die "starting the node failed (logs: $LOGS/containerd.log, $LOGS/kubelet.log)"
wait_for kube-apiserver 60 "$LOGS/kube-apiserver.log" kubectl get --raw /readyz

log "starting kube-controller-manager and kube-scheduler"
start kube-controller-manager "$K8S_BIN/kube-controller-manager" \
	--kubeconfig "$STATE/etc/controller-manager.kubeconfig" --secure-port 0 --leader-elect=false \
	--use-service-account-credentials --service-account-private-key-file "$PKI/sa.key" --root-ca-file "$PKI/ca.crt" \
	--controllers '*,-bootstrapsigner,-tokencleaner,-csrsigning,-csrapproving,-csrcleaner' \
	--profiling=false --v 1
start kube-scheduler "$K8S_BIN/kube-scheduler" \
	--kubeconfig "$STATE/etc/scheduler.kubeconfig" --secure-port 0 --leader-elect=false --profiling=false --v 1

wait_for "the node" 90 "$LOGS/kubelet.log" cluster_ready
wait_for "the default ServiceAccount" 30 "$LOGS/kube-controller-manager.log" kubectl -n default get serviceaccount default
log "cluster up in $((($(date +%s%N) - t0) / 1000000)) ms"
trap - EXIT

import_images
echo "$KUBECONFIG_ADMIN"
