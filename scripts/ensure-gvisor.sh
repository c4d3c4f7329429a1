#!/usr/bin/env bash
# Make sure gVisor is installed: runsc (the runtime the Docker engine runs
# for sandboxes with "isolation": "gvisor") and containerd-shim-runsc-v1
# (the containerd shim a Kubernetes node runs for the gVisor RuntimeClass),
# both in /usr/local/bin.
#
# They are built from gVisor's Go sources at the pseudo-version pinned in
# scripts/gvisor/go.mod, fetched through the Go module proxy (gVisor's
# `go` branch is the one that builds with the go tool). Debian bookworm's
# runsc package is a build of 2022-12-19: it has only the ptrace and KVM
# platforms, not systrap, and years of fixes are missing; docs/isolation.md
# says what was measured. The build (~5 min on two
# cores, cold) is cached in $AGENTBOX_CACHE/gvisor-KEY, KEY hashing every
# input, so only the first set-up on a machine pays it.
#
# Prints nothing on stdout; `scripts/ensure-gvisor.sh --print-key` prints
# the cache key.
set -euo pipefail
cd "$(dirname "$0")/.."
. scripts/common.sh
export PATH="$PATH:/usr/local/go/bin"

src=scripts/gvisor
bindir="${GVISOR_BINDIR:-/usr/local/bin}"
goflags="-trimpath -mod=readonly -buildvcs=false"

command -v go >/dev/null || die "Go not found (looked in PATH and /usr/local/go/bin): it builds gVisor"
version=$(awk '$1 == "require" && $2 == "gvisor.dev/gvisor" {print $3}' "$src/go.mod")
[ -n "$version" ] || die "$src/go.mod pins no gvisor.dev/gvisor version"
ldflags="-s -w -X gvisor.dev/gvisor/runsc/version.version=$version"
key=$(key_of "gvisor $version $(go env GOVERSION GOOS GOARCH) CGO_ENABLED=0 $goflags $ldflags" "$(cat "$src/go.mod" "$src/go.sum" "$src/tools.go")")
if [ "${1:-}" = --print-key ]; then
	echo "$key"
	exit 0
fi
dir="$AGENTBOX_CACHE/gvisor-$key"

build() {
	[ -f "$dir/.complete" ] && return
	local start tmp
	start=$(date +%s)
	tmp="$dir.tmp"
	rm -rf "$tmp"
	mkdir -p "$tmp/bin"
	log "building gVisor $version (runsc, containerd-shim-runsc-v1) into $dir: minutes when the Go caches are cold"
	# shellcheck disable=SC2086 # goflags is a list of flags
	(cd "$src" && CGO_ENABLED=0 GOFLAGS= go build $goflags -ldflags "$ldflags" -o "$tmp/bin/runsc" gvisor.dev/gvisor/runsc &&
		CGO_ENABLED=0 GOFLAGS= go build $goflags -ldflags "$ldflags" -o "$tmp/bin/containerd-shim-runsc-v1" gvisor.dev/gvisor/shim) \
		>"$tmp/build.log" 2>&1 || {
		tail -n 30 "$tmp/build.log" >&2
		die "building gVisor failed (log: $tmp/build.log)"
	}
	"$tmp/bin/runsc" --version >/dev/null || die "the runsc just built does not run"
	echo "$version" >"$tmp/.complete"
	rm -rf "$dir"
	mv "$tmp" "$dir"
	log "built gVisor in $(($(date +%s) - start)) s"
}
with_lock "gvisor-$key" build

# Installed by copy (an atomic rename), only when different: a running
# sandbox keeps the binary it started with.
for b in runsc containerd-shim-runsc-v1; do
	if ! cmp -s "$dir/bin/$b" "$bindir/$b" 2>/dev/null; then
		as_root mkdir -p "$bindir"
		as_root cp "$dir/bin/$b" "$bindir/.$b.tmp"
		as_root mv -f "$bindir/.$b.tmp" "$bindir/$b"
		log "installed $bindir/$b ($version)"
	fi
done
