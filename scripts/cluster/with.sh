#!/usr/bin/env bash
# with.sh CMD...: run CMD with this clone's local cluster up, for `make
# test` and `make bench`. A cluster that was not up is started first and
# stopped afterwards (also when CMD fails or is interrupted), so no
# process is left to trouble the next run; one already up is left running.
# AGENTBOX_CLUSTER=0 runs CMD alone (cluster tests then skip, or fail
# under CI=true).
set -uo pipefail
dir=$(dirname "$0")
if [ "${AGENTBOX_CLUSTER:-1}" = 0 ]; then
	exec "$@"
fi
started=
stop() {
	if [ -n "$started" ]; then
		started=
		"$dir/down.sh" || return 1
	fi
}
trap 'stop; exit 130' INT TERM
if ! "$dir/status.sh"; then
	started=1
fi
"$dir/up.sh" >/dev/null || exit 1
rc=0
"$@" || rc=$?
stop || rc=1
exit $rc
