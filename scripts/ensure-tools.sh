#!/usr/bin/env bash
# Install the host tools the tests and the local runtime use when missing:
# bubblewrap (the "local" sandbox runtime), git (workspace history), curl
# (the demo's HTTP calls), chromium (the web app's browser tests, run
# headless; AGENTBOX_CHROMIUM names another browser binary) and
# PostgreSQL's server programs (the store's tests start instances of their
# own: internal/testenv.Postgres).
set -euo pipefail
cd "$(dirname "$0")/.."
. scripts/common.sh

missing=()
command -v bwrap >/dev/null 2>&1 || missing+=(bubblewrap)
command -v git >/dev/null 2>&1 || missing+=(git)
command -v curl >/dev/null 2>&1 || missing+=(curl ca-certificates)
if [ -z "${AGENTBOX_CHROMIUM:-}" ] && ! command -v chromium >/dev/null 2>&1; then
	missing+=(chromium)
fi
has_postgres() {
	compgen -G '/usr/lib/postgresql/*/bin/postgres' >/dev/null || command -v postgres >/dev/null 2>&1
}
if ! has_postgres; then
	missing+=(postgresql)
	# The tests run PostgreSQL in folders of their own: Debian's package
	# must not create (and start) a system cluster. A drop-in of
	# createcluster.conf says so, leaving the package's own file alone.
	as_root mkdir -p /etc/postgresql-common/createcluster.d
	echo 'create_main_cluster = false' | as_root tee /etc/postgresql-common/createcluster.d/agentbox-no-main-cluster.conf >/dev/null
fi
if [ ${#missing[@]} -gt 0 ]; then
	apt_install "${missing[@]}"
fi
log "host tools present (bwrap, git, curl, chromium, postgres)"
