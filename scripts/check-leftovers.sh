#!/usr/bin/env bash
# Detect containers labelled by agentbox that the tests left behind.
#
#   check-leftovers.sh snapshot FILE   record the labelled containers now
#   check-leftovers.sh check [FILE]    fail if a labelled container not in
#                                      FILE still exists (after a short grace
#                                      period for removals in flight)
set -euo pipefail

list() {
	timeout 20 docker ps -a --filter label=dev.agentbox.product --format '{{.ID}}' | sort
}

case "${1:-check}" in
snapshot)
	mkdir -p "$(dirname "$2")"
	list >"$2"
	;;
check)
	before=${2:-/dev/null}
	[ -f "$before" ] || before=/dev/null
	for _ in $(seq 15); do
		new=$(comm -13 "$before" <(list))
		[ -z "$new" ] && break
		sleep 1
	done
	if [ -n "$new" ]; then
		echo "error: containers left behind by the tests:" >&2
		for id in $new; do
			timeout 20 docker ps -a --filter "id=$id" --format '  {{.ID}} {{.Names}} {{.Status}} instance={{.Label "dev.agentbox.instance"}} image={{.Image}}' >&2
		done
		exit 1
	fi
	echo "==> no agentbox container left behind" >&2
	;;
*)
	echo "usage: $0 snapshot FILE | check [FILE]" >&2
	exit 2
	;;
esac
