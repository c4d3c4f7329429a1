#!/usr/bin/env bash
# Install the host tools the tests and the local runtime use when missing:
# bubblewrap (the "local" sandbox runtime), git (workspace history), curl
# (the demo's HTTP calls) and chromium (the web app's browser tests, run
# headless; AGENTBOX_CHROMIUM names another browser binary).
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
if [ ${#missing[@]} -gt 0 ]; then
	apt_install "${missing[@]}"
fi
log "host tools present (bwrap, git, curl, chromium)"
