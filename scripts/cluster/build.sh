#!/usr/bin/env bash
# Build (or find in $AGENTBOX_CACHE) everything the local cluster runs and
# write .cache/cluster/paths.env naming it:
#   - kube-apiserver, kube-controller-manager, kube-scheduler, kubelet and
#     kubectl at $K8S_VERSION, from the Go module proxy through the wrapper
#     module in this folder (~6 min and ~3 GB of Go build cache when cold);
#   - etcd from Debian's etcd-server package (extracted, not installed, so
#     no service is started);
#   - the cni-loopback plugin (cni-loopback/), also installed as `loopback`;
#   - the pause image: pause.c compiled statically, packed as a
#     docker-archive tarball for `ctr images import`.
# containerd, runc and ctr come from Debian's packages, installed when
# missing. Each cached thing is built under a lock, into a temporary folder
# moved into place when complete, so an interrupted build is redone.
set -euo pipefail
. "$(dirname "$0")/lib.sh"
need_root "$0" "$@"
export PATH="$PATH:/usr/local/go/bin"
command -v go >/dev/null || die "Go not found (looked in PATH and /usr/local/go/bin)"

# Debian packages: containerd and runc are run (our own instance), gcc and
# libc6-dev build the pause binary, openssl makes the certificates.
missing=()
command -v containerd >/dev/null 2>&1 || missing+=(containerd)
command -v runc >/dev/null 2>&1 || missing+=(runc)
command -v gcc >/dev/null 2>&1 || missing+=(gcc)
[ -e /usr/include/stdio.h ] || missing+=(libc6-dev)
command -v openssl >/dev/null 2>&1 || missing+=(openssl)
command -v unshare >/dev/null 2>&1 || missing+=(util-linux)
command -v ss >/dev/null 2>&1 || missing+=(iproute2)
if [ ${#missing[@]} -gt 0 ]; then
	apt_install "${missing[@]}"
fi

# --- Kubernetes --------------------------------------------------------
k8s_dir="$AGENTBOX_CACHE/k8s-$(k8s_key)"
build_k8s() {
	[ -f "$k8s_dir/.complete" ] && return
	local start tmp
	start=$(date +%s)
	tmp="$k8s_dir.tmp"
	rm -rf "$tmp"
	mkdir -p "$tmp/bin"
	log "building Kubernetes $K8S_VERSION ($K8S_CMDS) into $k8s_dir: several minutes when the Go caches are cold"
	local pkgs=() c
	for c in $K8S_CMDS; do pkgs+=("k8s.io/kubernetes/cmd/$c"); done
	# shellcheck disable=SC2086 # K8S_GOFLAGS is a list of flags
	(cd "$CLUSTER_SRC" && CGO_ENABLED=0 GOFLAGS= go build $K8S_GOFLAGS -ldflags "$(k8s_ldflags)" -o "$tmp/bin/" "${pkgs[@]}") \
		>"$tmp/build.log" 2>&1 || {
		tail -n 30 "$tmp/build.log" >&2
		die "building Kubernetes failed (log: $tmp/build.log)"
	}
	echo "$K8S_VERSION" >"$tmp/.complete"
	rm -rf "$k8s_dir"
	mv "$tmp" "$k8s_dir"
	log "built Kubernetes in $(($(date +%s) - start)) s"
}
with_lock "k8s-$(k8s_key)" build_k8s

# --- etcd ----------------------------------------------------------------
etcd_version() {
	local v
	v=$(apt-cache policy "$ETCD_PACKAGE" 2>/dev/null | awk '/Candidate:/ {print $2}')
	if [ -z "$v" ] || [ "$v" = "(none)" ]; then
		as_root apt-get update -qq
		v=$(apt-cache policy "$ETCD_PACKAGE" 2>/dev/null | awk '/Candidate:/ {print $2}')
	fi
	[ -n "$v" ] && [ "$v" != "(none)" ] || die "Debian package $ETCD_PACKAGE not found (apt-cache policy $ETCD_PACKAGE)"
	echo "$v"
}
# A cached etcd of any version is used as is: only a missing one asks apt.
etcd_dir=$(find "$AGENTBOX_CACHE" -maxdepth 1 -name 'k8s-etcd-*' -type d ! -name '*.tmp' 2>/dev/null | sort | tail -n 1)
if [ -z "$etcd_dir" ] || [ ! -f "$etcd_dir/.complete" ]; then
	etcd_dir="$AGENTBOX_CACHE/k8s-etcd-$(etcd_version | tr ':~+' '___')"
	fetch_etcd() {
		[ -f "$etcd_dir/.complete" ] && return
		local tmp="$etcd_dir.tmp" v
		v=$(etcd_version)
		rm -rf "$tmp"
		mkdir -p "$tmp/deb"
		log "apt-get download $ETCD_PACKAGE=$v"
		(cd "$tmp/deb" && apt-get download -qq -o APT::Sandbox::User=root "$ETCD_PACKAGE=$v") || die "apt-get download $ETCD_PACKAGE=$v failed"
		dpkg-deb -x "$tmp"/deb/*.deb "$tmp/root"
		[ -x "$tmp/root/usr/bin/etcd" ] || die "$ETCD_PACKAGE $v has no /usr/bin/etcd"
		mkdir -p "$tmp/bin"
		mv "$tmp/root/usr/bin/etcd" "$tmp/bin/etcd"
		rm -rf "$tmp/deb" "$tmp/root"
		echo "$v" >"$tmp/.complete"
		rm -rf "$etcd_dir"
		mv "$tmp" "$etcd_dir"
	}
	with_lock k8s-etcd fetch_etcd
fi

# --- the CNI plugin ------------------------------------------------------
cni_dir="$AGENTBOX_CACHE/k8s-cni-$(cni_key)"
build_cni() {
	[ -f "$cni_dir/.complete" ] && return
	local tmp="$cni_dir.tmp"
	rm -rf "$tmp"
	mkdir -p "$tmp/bin"
	# shellcheck disable=SC2086
	(cd "$CLUSTER_SRC" && CGO_ENABLED=0 GOFLAGS= go build $K8S_GOFLAGS -ldflags '-s -w' -o "$tmp/bin/cni-loopback" ./cni-loopback) ||
		die "building the cni-loopback plugin failed"
	# containerd 1.6 always sets up a network named for the standard
	# `loopback` plugin before the configured one: the same binary serves.
	ln "$tmp/bin/cni-loopback" "$tmp/bin/loopback"
	touch "$tmp/.complete"
	rm -rf "$cni_dir"
	mv "$tmp" "$cni_dir"
}
with_lock "k8s-cni-$(cni_key)" build_cni

# --- the pause image -----------------------------------------------------
pause_dir="$AGENTBOX_CACHE/k8s-pause-$(pause_key)"
pause_image="localhost/agentbox-pause:$(pause_key)"
build_pause() {
	[ -f "$pause_dir/.complete" ] && return
	local tmp="$pause_dir.tmp" layer_sha config config_sha arch
	rm -rf "$tmp"
	mkdir -p "$tmp/layer" "$tmp/archive"
	gcc -static -Os -s -o "$tmp/layer/pause" "$CLUSTER_SRC/pause.c" || die "compiling pause.c failed (gcc, libc6-dev)"
	tar -C "$tmp/layer" --owner=0 --group=0 --numeric-owner --mtime=@0 -cf "$tmp/layer.tar" pause
	layer_sha=$(sha256sum "$tmp/layer.tar" | cut -d' ' -f1)
	case "$(uname -m)" in x86_64) arch=amd64 ;; aarch64) arch=arm64 ;; *) arch=$(uname -m) ;; esac
	# The same user as the upstream pause image: never root.
	config=$(printf '{"architecture":"%s","os":"linux","config":{"Entrypoint":["/pause"],"User":"65535:65535"},"rootfs":{"type":"layers","diff_ids":["sha256:%s"]}}' "$arch" "$layer_sha")
	config_sha=$(printf '%s' "$config" | sha256sum | cut -d' ' -f1)
	printf '%s' "$config" >"$tmp/archive/$config_sha.json"
	mkdir -p "$tmp/archive/$layer_sha"
	mv "$tmp/layer.tar" "$tmp/archive/$layer_sha/layer.tar"
	printf '[{"Config":"%s.json","RepoTags":["%s"],"Layers":["%s/layer.tar"]}]' "$config_sha" "$pause_image" "$layer_sha" >"$tmp/archive/manifest.json"
	tar -C "$tmp/archive" --owner=0 --group=0 --numeric-owner --mtime=@0 -cf "$tmp/pause.tar" .
	rm -rf "$tmp/layer" "$tmp/archive"
	touch "$tmp/.complete"
	rm -rf "$pause_dir"
	mv "$tmp" "$pause_dir"
}
with_lock "k8s-pause-$(pause_key)" build_pause

mkdir -p "$STATE"
ln -sfn "$k8s_dir/bin" "$STATE/bin"
cat >"$STATE/paths.env" <<EOF
K8S_BIN=$k8s_dir/bin
ETCD=$etcd_dir/bin/etcd
CNI_BIN=$cni_dir/bin
PAUSE_TAR=$pause_dir/pause.tar
PAUSE_IMAGE=$pause_image
EOF
