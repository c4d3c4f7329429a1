#!/usr/bin/env bash
# Succeeds when this clone's local cluster is up: every component's process
# runs, the API server is ready and the node is Ready. Prints nothing;
# `make cluster` uses it to leave a running cluster alone, `make test` to
# stop at the end only a cluster it started.
set -euo pipefail
. "$(dirname "$0")/lib.sh"
[ -f "$STATE/paths.env" ] && [ -f "$STATE/ports.env" ] && [ -f "$KUBECONFIG_ADMIN" ] || exit 1
. "$STATE/paths.env"
for c in $COMPONENTS; do
	pid_alive "$c" || exit 1
done
kubectl() { timeout 10 "$K8S_BIN/kubectl" --kubeconfig "$KUBECONFIG_ADMIN" "$@"; }
kubectl get --raw /readyz >/dev/null 2>&1 || exit 1
[ "$(kubectl get node localhost -o jsonpath='{.status.conditions[?(@.type=="Ready")].status}' 2>/dev/null)" = True ]
