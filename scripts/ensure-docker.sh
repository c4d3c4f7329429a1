#!/usr/bin/env bash
# Make sure a Docker engine answers, with gVisor registered. An engine that
# already answers is reused; otherwise Debian's docker.io is installed when
# missing and dockerd is started in the background without bridge
# networking (containers use "none" or "host" networking only) and without
# iptables rules.
#
# gVisor (scripts/ensure-gvisor.sh) is registered in /etc/docker/daemon.json
# as two runtimes, added to what the file holds and reloaded into a
# running engine (SIGHUP) when they differ:
#   runsc          sandboxes with "isolation": "gvisor" (network none:
#                  gVisor's own network stack, loopback only)
#   runsc-hostnet  the same with network "host" (--network=host: the
#                  host's network stack, which a sandbox asked for)
# Both run the systrap platform (GVISOR_PLATFORM: systrap, ptrace or kvm),
# which needs no KVM, and may connect to the Unix sockets mounted into the
# sandbox (--host-uds=open: the bridge's). AGENTBOX_GVISOR=0 leaves gVisor
# out. A remote engine (DOCKER_HOST) is only checked.
set -euo pipefail
cd "$(dirname "$0")/.."
. scripts/common.sh

timeout_s="${DOCKER_START_TIMEOUT:-60}"
logfile="${DOCKERD_LOG:-/var/log/agentbox-dockerd.log}"

answers() { timeout 10 docker version --format '{{.Server.APIVersion}}' >/dev/null 2>&1; }

gvisor="${AGENTBOX_GVISOR:-1}"
platform="${GVISOR_PLATFORM:-systrap}"
case "$platform" in systrap | ptrace | kvm) ;; *) die "GVISOR_PLATFORM=$platform: want systrap, ptrace or kvm" ;; esac
runsc_path=/usr/local/bin/runsc
daemon_json="${DOCKER_DAEMON_JSON:-/etc/docker/daemon.json}"

# runtimes prints the daemon.json runtimes gVisor needs.
runtimes() {
	local args="\"--platform=$platform\", \"--host-uds=open\""
	printf '{"runsc": {"path": "%s", "runtimeArgs": [%s]}, "runsc-hostnet": {"path": "%s", "runtimeArgs": [%s, "--network=host"]}}\n' \
		"$runsc_path" "$args" "$runsc_path" "$args"
}

# register_gvisor writes the runtimes into daemon.json when it lacks them
# (other settings and runtimes are kept) and has a running local engine
# reload it; it prints "changed" when it wrote.
register_gvisor() {
	command -v jq >/dev/null 2>&1 || apt_install jq
	local want cur
	want=$(runtimes | jq -cS .)
	cur=$(jq -cS '.runtimes // {} | {runsc, "runsc-hostnet"}' "$daemon_json" 2>/dev/null || echo "")
	[ "$cur" = "$want" ] && return
	as_root mkdir -p "$(dirname "$daemon_json")"
	if [ -s "$daemon_json" ]; then
		jq --argjson rt "$want" '.runtimes = ((.runtimes // {}) + $rt)' "$daemon_json" >"$daemon_json.tmp" ||
			die "$daemon_json is not valid JSON: fix it, then run this again"
	else
		jq -n --argjson rt "$want" '{runtimes: $rt}' >"$daemon_json.tmp"
	fi
	as_root mv -f "$daemon_json.tmp" "$daemon_json"
	log "registered gVisor ($platform) in $daemon_json"
	echo changed
}

# engine_has_gvisor reports whether the engine lists both runtimes with
# their arguments.
engine_has_gvisor() {
	local got
	got=$(timeout 10 docker info --format '{{json .Runtimes}}' 2>/dev/null | jq -cS '{runsc, "runsc-hostnet"} | map_values({path, runtimeArgs})' 2>/dev/null) || return 1
	[ "$got" = "$(runtimes | jq -cS 'map_values({path, runtimeArgs})')" ]
}

# reload_engine has the running local dockerd read daemon.json again.
reload_engine() {
	local pid
	pid=$(pgrep -xo dockerd 2>/dev/null) || die "gVisor is registered in $daemon_json, but no local dockerd runs to reload it: restart the Docker engine"
	as_root kill -HUP "$pid"
	for _ in $(seq 20); do
		engine_has_gvisor && return
		sleep 0.5
	done
	die "the Docker engine did not load the gVisor runtimes from $daemon_json (see its log)"
}

# gvisor_ready installs and registers gVisor for the engine that answers.
gvisor_ready() {
	[ "$gvisor" = 1 ] || return 0
	if [ -n "${DOCKER_HOST:-}" ]; then
		engine_has_gvisor || log "the engine at DOCKER_HOST=$DOCKER_HOST has no runsc runtime registered: sandboxes with isolation gvisor will fail there"
		return 0
	fi
	scripts/ensure-gvisor.sh
	register_gvisor >/dev/null
	engine_has_gvisor || reload_engine
	log "gVisor runtimes registered with the Docker engine (runsc, runsc-hostnet; platform $platform)"
}

if command -v docker >/dev/null 2>&1 && answers; then
	log "Docker engine answers (API $(docker version --format '{{.Server.APIVersion}}'))"
	gvisor_ready
	exit 0
fi
if [ -n "${DOCKER_HOST:-}" ]; then
	die "DOCKER_HOST=$DOCKER_HOST is set but no engine answers there"
fi
if ! command -v dockerd >/dev/null 2>&1 || ! command -v docker >/dev/null 2>&1; then
	apt_install docker.io
fi
if [ "$gvisor" = 1 ]; then # before the start, so the engine starts with them
	scripts/ensure-gvisor.sh
	register_gvisor >/dev/null
fi
if answers; then # the package may have started the service itself
	gvisor_ready
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
		gvisor_ready
		exit 0
	fi
	sleep 1
done
tail -n 20 "$logfile" >&2 2>/dev/null || true
die "the Docker engine did not answer within ${timeout_s}s (see $logfile)"
