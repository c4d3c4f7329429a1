#!/usr/bin/env bash
# Detect containers labelled by agentbox that the tests left behind (and
# report the mounts they left).
#
#   check-leftovers.sh snapshot FILE   record the labelled containers now
#   check-leftovers.sh check [FILE]    fail if a labelled container not in
#                                      FILE still exists (after a short grace
#                                      period for removals in flight)
set -euo pipefail

list() {
	timeout 20 docker ps -a --filter label=dev.agentbox.product --format '{{.ID}}' | sort
}

# mounts lists the host's mount points that look like agentbox's: a
# workspace image, a pool slot, a test server's folder.
mounts() {
	awk '{print $5}' /proc/self/mountinfo | grep -E 'agentbox|/abt-' | sort || true
}

case "${1:-check}" in
snapshot)
	mkdir -p "$(dirname "$2")"
	list >"$2"
	mounts >"$2.mounts"
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
	# Mounts are reported, not failed on: a mount here may be another
	# agentbox's on the same host (a server running beside the tests).
	left=$(comm -13 "$before.mounts" <(mounts) 2>/dev/null || mounts)
	if [ -n "$left" ]; then
		echo "warning: mounts made during the tests are still there:" >&2
		sed 's/^/  /' <<<"$left" >&2
	fi
	;;
*)
	echo "usage: $0 snapshot FILE | check [FILE]" >&2
	exit 2
	;;
esac
