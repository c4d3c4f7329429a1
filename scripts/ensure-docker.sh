#!/usr/bin/env bash
# Make sure a Docker engine answers. An engine that already answers is
# reused; otherwise Debian's docker.io is installed when missing and dockerd
# is started in the background without bridge networking (containers use
# "none" or "host" networking only) and without iptables rules.
set -euo pipefail
cd "$(dirname "$0")/.."
. scripts/common.sh

timeout_s="${DOCKER_START_TIMEOUT:-60}"
logfile="${DOCKERD_LOG:-/var/log/agentbox-dockerd.log}"

answers() { timeout 10 docker version --format '{{.Server.APIVersion}}' >/dev/null 2>&1; }

if command -v docker >/dev/null 2>&1 && answers; then
	log "Docker engine answers (API $(docker version --format '{{.Server.APIVersion}}'))"
	exit 0
fi
if [ -n "${DOCKER_HOST:-}" ]; then
	die "DOCKER_HOST=$DOCKER_HOST is set but no engine answers there"
fi
if ! command -v dockerd >/dev/null 2>&1 || ! command -v docker >/dev/null 2>&1; then
	apt_install docker.io
fi
if answers; then # the package may have started the service itself
	exit 0
fi
if command -v pgrep >/dev/null 2>&1 && pgrep -x dockerd >/dev/null 2>&1; then
	log "dockerd is running but not answering yet; waiting"
else
	[ "$(id -u)" = 0 ] || die "no Docker engine answers and starting dockerd needs root"
	mkdir -p "$(dirname "$logfile")"
	log "starting dockerd (log: $logfile)"
	nohup dockerd --iptables=false --ip6tables=false --bridge=none >>"$logfile" 2>&1 </dev/null &
fi
for _ in $(seq "$timeout_s"); do
	if answers; then
		log "Docker engine is up"
		exit 0
	fi
	sleep 1
done
tail -n 20 "$logfile" >&2 2>/dev/null || true
die "the Docker engine did not answer within ${timeout_s}s (see $logfile)"
