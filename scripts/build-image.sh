#!/usr/bin/env bash
# Build the sandbox images offline: no image registry is needed.
#
#   PREFIX/sandbox-base:latest          Debian bookworm with python3, Node.js 22 (and npm),
#                                       git, curl, vim, zip, unzip, procps, less, tree,
#                                       ca-certificates, tini; the user agent (uid/gid 1000),
#                                       /workspace, /etc/gitconfig
#   PREFIX/sandbox-base-full:latest     the base and Go
#   PREFIX/sandbox-claude:VERSION       the base and Claude Code, per supported version;
#   PREFIX/sandbox-claude:latest        the pinned version (what the product runs)
#   PREFIX/sandbox-claude-full:latest   the base-full and the pinned Claude Code
#   PREFIX/sandbox-codex:latest         the base and the Codex CLI
#   PREFIX/sandbox-gemini:latest        the base and the Gemini CLI
#   PREFIX/sandbox-opencode:latest      the base and opencode
#   PREFIX/sandbox-desktop:latest       the base's files and the pinned Claude Code on a
#                                       root filesystem with a desktop: Xvfb, openbox,
#                                       Chromium, x11vnc, noVNC and websockify (Debian's),
#                                       run by images/desktop/agentbox-desktop
#
# PREFIX is AGENTBOX_IMAGE_PREFIX (default agentbox); versions come from
# scripts/versions.sh. A Debian root filesystem from debootstrap (cached in
# $AGENTBOX_CACHE/rootfs-KEY) is imported as PREFIX/sandbox-rootfs:KEY; the
# desktop image has a root filesystem of its own (the same packages and
# the desktop's), made by a second debootstrap that runs beside the first
# and beside the other images' builds. Each
# image is then a build stage with COPY instructions only (no RUN, so no
# network), its files prepared here: the CLIs and Node.js from
# scripts/ensure-cli.sh's installs, Go from the Go module proxy's toolchain
# module (cached in $AGENTBOX_CACHE/go-VERSION-ARCH, its SHA-256 pinned).
# Each image is labelled with a hash of its inputs (this script, the pins it
# uses, its parent's hash) and built only when no image with that hash
# exists, then smoke-tested; images/images_test.go checks them in depth.
# images/*/Dockerfile build the same images from a registry.
#
#   build-image.sh [NAME...]   build NAME (base base-full claude claude-full
#                              codex gemini opencode desktop; default: all) and what
#                              it is built on
#   build-image.sh --list      print the name of every image built by default
set -euo pipefail
cd "$(dirname "$0")/.."
. scripts/common.sh

all=(base base-full claude claude-full codex gemini opencode desktop)

if [ "${1:-}" = --list ]; then
	image_name base
	image_name base-full
	image_name claude
	for v in $(claude_versions); do image_name claude "$v"; done
	image_name claude-full
	image_name codex
	image_name gemini
	image_name opencode
	image_name desktop
	exit 0
fi
want=("$@")
[ ${#want[@]} -gt 0 ] || want=("${all[@]}")
for w in "${want[@]}"; do
	[[ " ${all[*]} " == *" $w "* ]] || die "unknown image $w (known: ${all[*]})"
done
wanted() {
	local w
	for w in "${want[@]}"; do [ "$w" = "$1" ] && return 0; done
	return 1
}
# What an image is built on is built too.
wanted claude-full && want+=(base-full)
want+=(base)

# One build per prefix at a time (two builds of the same names would race);
# the shared caches have their own locks.
if [ -z "${AGENTBOX_IMAGE_LOCKED:-}" ]; then
	AGENTBOX_IMAGE_LOCKED=1 with_lock "image-$(key_of "$AGENTBOX_IMAGE_PREFIX")" "$0" "$@"
	exit
fi

mirror="${DEBIAN_MIRROR:-http://deb.debian.org/debian}"
packages="bash,ca-certificates,coreutils,curl,git,less,libstdc++6,procps,python3,tini,tree,unzip,vim,zip"
# The desktop's: the X server, window manager, browser, VNC server, the
# noVNC client and its WebSocket bridge (all from Debian: nothing of them
# is kept in this repository), Xlib for screenshots, a font, and the
# providers of two virtual packages, which debootstrap does not choose
# (dconf's session bus, cryptography's cffi backend).
desktop_packages="xvfb,openbox,chromium,x11vnc,novnc,websockify,python3-xlib,fonts-dejavu-core,dbus-x11,python3-cffi-backend"
label=dev.agentbox.image.inputs
platform=$(npm_platform)
arch=$(go_arch)
cli=.cache/cli
stages=.cache/image-build
script_hash=$(cat "$0" scripts/common.sh | sha256sum | cut -c1-16)

scripts/ensure-docker.sh
scripts/ensure-cli.sh

label_of() { timeout 20 docker image inspect --format "{{ index .Config.Labels \"$label\" }}" "$1" 2>/dev/null || true; }
id_of() { timeout 20 docker image inspect --format '{{.Id}}' "$1" 2>/dev/null || true; }

# copy SRC DST: hard links where the file system allows (the build context
# is only read), a copy elsewhere.
copy() { cp -al "$1" "$2" 2>/dev/null || cp -a "$1" "$2"; }

# 1. The root filesystems (the slow part, cached across builds and clones).
# make_rootfs DIR KEY PACKAGES makes DIR with debootstrap unless it holds
# KEY's root filesystem already.
make_rootfs() {
	local dir=$1 key=$2 pkgs=$3 logf
	[ "$(cat "$dir/.agentbox-rootfs" 2>/dev/null)" = "$key" ] && return 0
	logf="$dir.debootstrap.log"
	log "debootstrap $DEBIAN_SUITE ($pkgs) into $dir"
	rm -rf "$dir.tmp"
	as_root debootstrap --variant=minbase --include="$pkgs" "$DEBIAN_SUITE" "$dir.tmp" "$mirror" >"$logf" 2>&1 ||
		{ tail -n 20 "$logf" >&2; die "debootstrap failed (full log: $logf)"; }
	# debootstrap may end well with packages left unconfigured.
	local audit
	audit=$(as_root chroot "$dir.tmp" dpkg --audit 2>&1) && [ -z "$audit" ] ||
		die "debootstrap left packages unconfigured in $dir.tmp (full log: $logf): $audit"
	# Trim what a sandbox never needs.
	rm -rf "$dir.tmp"/var/cache/apt/archives/*.deb "$dir.tmp"/var/lib/apt/lists/* \
		"$dir.tmp"/usr/share/doc/* "$dir.tmp"/usr/share/man/*
	# The desktop's: message translations, and Chromium's but English
	# (some 120 MB; its key says so).
	if [[ "$key" == *" trim-translations" ]]; then
		rm -rf "$dir.tmp"/usr/share/locale/*
		find "$dir.tmp/usr/lib/chromium/locales" -type f ! -name 'en-US.pak' -delete
	fi
	echo "$key" >"$dir.tmp/.agentbox-rootfs"
	rm -rf "$dir"
	mv "$dir.tmp" "$dir"
}
# import_rootfs DIR IMAGE imports DIR as IMAGE unless the engine has it.
import_rootfs() {
	[ -n "$(id_of "$2")" ] && return 0
	log "docker import $2"
	tar -C "$1" --exclude=./.agentbox-rootfs --numeric-owner -c . | docker import - "$2" >/dev/null
}
command -v debootstrap >/dev/null 2>&1 || apt_install debootstrap
rootfs_key="$DEBIAN_SUITE $packages $mirror"
rootfs_hash=$(key_of "$rootfs_key")
rootfs="$AGENTBOX_CACHE/rootfs-$rootfs_hash"
# The desktop's root filesystem is made in the background, beside the
# base's and the images built on it; the desktop image waits for it.
desktop_rootfs_job=""
if wanted desktop; then
	desktop_rootfs_key="$DEBIAN_SUITE $packages,$desktop_packages $mirror trim-translations"
	desktop_rootfs_hash=$(key_of "$desktop_rootfs_key")
	desktop_rootfs="$AGENTBOX_CACHE/rootfs-$desktop_rootfs_hash"
	with_lock "rootfs-$desktop_rootfs_hash" make_rootfs "$desktop_rootfs" "$desktop_rootfs_key" "$packages,$desktop_packages" &
	desktop_rootfs_job=$!
fi
with_lock "rootfs-$rootfs_hash" make_rootfs "$rootfs" "$rootfs_key" "$packages"
rootfs_image="$(image_name rootfs "$rootfs_hash")"
import_rootfs "$rootfs" "$rootfs_image"

# 2. Go for the -full images: the toolchain module, verified by its pinned
# SHA-256 (the module proxy's checksum database is not reachable).
go_dir="$AGENTBOX_CACHE/go-$GO_VERSION-$arch"
fetch_go() {
	[ -x "$go_dir/go/bin/go" ] && return 0
	local sum proxy module url
	case "$arch" in amd64) sum=$GO_SHA256_AMD64 ;; arm64) sum=$GO_SHA256_ARM64 ;; esac
	proxy=${GOPROXY:-https://proxy.golang.org}
	proxy=$(printf '%s\n' "$proxy" | tr ',|' '\n\n' | grep -m1 '^https\?://' || echo https://proxy.golang.org)
	module="v0.0.1-go$GO_VERSION.linux-$arch"
	url="${proxy%/}/golang.org/toolchain/@v/$module.zip"
	command -v unzip >/dev/null 2>&1 || apt_install unzip
	command -v curl >/dev/null 2>&1 || apt_install curl ca-certificates
	log "Go $GO_VERSION from $url"
	rm -rf "$go_dir.tmp"
	mkdir -p "$go_dir.tmp"
	curl -fsSL --retry 3 --connect-timeout 20 -o "$go_dir.tmp/go.zip" "$url" ||
		die "cannot download Go $GO_VERSION ($url); is the Go module proxy reachable (GOPROXY=${GOPROXY:-})?"
	echo "$sum  $go_dir.tmp/go.zip" | sha256sum -c --quiet - >/dev/null 2>&1 ||
		die "$url does not match the SHA-256 pinned in scripts/versions.sh ($sum)"
	unzip -q "$go_dir.tmp/go.zip" -d "$go_dir.tmp/x"
	mv "$go_dir.tmp/x/golang.org/toolchain@$module" "$go_dir.tmp/go"
	# Module zips need not keep execute bits; the go command sets them too.
	chmod -R a+rX "$go_dir.tmp/go"
	chmod a+x "$go_dir.tmp/go/bin"/* "$go_dir.tmp/go/pkg/tool"/*/*
	rm -rf "$go_dir.tmp/go.zip" "$go_dir.tmp/x"
	"$go_dir.tmp/go/bin/go" version >/dev/null || die "the Go toolchain from $url does not run here"
	rm -rf "$go_dir"
	mv "$go_dir.tmp" "$go_dir"
}
if wanted base-full; then
	with_lock "go-$GO_VERSION-$arch" fetch_go
fi

# 3. The images.
built=()    # what this run built, for the summary
replaced=() # ids of images this run replaced, removed at the end if unused

# build IMAGE PARENT PARENT_HASH PINS SMOKE FILL builds IMAGE from PARENT
# unless an image labelled with the hash of its inputs exists. FILL, called
# with a stage folder, puts the image's files there and prints the
# Dockerfile's instructions after FROM; SMOKE is a sh -e script that must
# pass in the image, run as the sandbox runs it (no network, read-only root).
build() {
	local image=$1 parent=$2 parent_hash=$3 pins=$4 smoke=$5 fill=$6 hash previous stage start out
	hash=$(printf '%s\n' "$script_hash" "$parent_hash" "$pins" | sha256sum | cut -c1-16)
	if [ "$(label_of "$image")" = "$hash" ]; then
		log "image $image is up to date (inputs $hash)"
		return 0
	fi
	start=$(date +%s)
	previous=$(id_of "$image")
	stage="$stages/${image//[\/:]/_}"
	rm -rf "$stage"
	mkdir -p "$stage"
	{
		echo "FROM $parent"
		"$fill" "$stage"
		echo "LABEL $label=\"$hash\""
	} >"$stage/Dockerfile.tmp"
	mv "$stage/Dockerfile.tmp" "$stage/Dockerfile"
	log "docker build $image"
	# One retry: the engine's context extraction has been seen killed on a
	# busy machine, and the second attempt reuses the layers of the first.
	if ! out=$(DOCKER_BUILDKIT=0 docker build --quiet --network none -t "$image" "$stage" 2>&1) &&
		! { log "docker build $image failed ($(printf '%s' "$out" | tail -n 1)); trying again" &&
			out=$(DOCKER_BUILDKIT=0 docker build --quiet --network none -t "$image" "$stage" 2>&1); }; then
		printf '%s\n' "$out" >&2
		die "docker build of $image failed"
	fi
	rm -rf "$stage"
	out=$(timeout 120 docker run --rm --network none --read-only --tmpfs /tmp --tmpfs /home/agent:uid=1000,gid=1000 \
		--cap-drop ALL --security-opt no-new-privileges "$image" sh -ec "$smoke" 2>&1) ||
		die "smoke test of $image failed: $out"
	if [ -n "$previous" ] && [ "$previous" != "$(id_of "$image")" ]; then
		replaced+=("$previous")
	fi
	built+=("$image")
	log "built $image (inputs $hash) in $(($(date +%s) - start))s"
}

# retag IMAGE ALIAS points ALIAS at IMAGE.
retag() {
	local previous
	previous=$(id_of "$2")
	[ "$previous" = "$(id_of "$1")" ] && return 0
	docker tag "$1" "$2"
	[ -n "$previous" ] && replaced+=("$previous")
	log "tagged $2 = $1"
}

fill_base() {
	local s=$1
	mkdir -p "$s/etc" "$s/home/agent" "$s/workspace" "$s/usr/local/bin" "$s/usr/local/lib/node_modules"
	cp "$rootfs/etc/passwd" "$rootfs/etc/group" "$rootfs/etc/shadow" "$s/etc/"
	grep -q '^agent:' "$s/etc/passwd" || echo 'agent:x:1000:1000:agent:/home/agent:/bin/bash' >>"$s/etc/passwd"
	grep -q '^agent:' "$s/etc/group" || echo 'agent:x:1000:' >>"$s/etc/group"
	grep -q '^agent:' "$s/etc/shadow" || echo 'agent:!:19000::::::' >>"$s/etc/shadow"
	chmod 644 "$s/etc/passwd" "$s/etc/group"
	chmod 640 "$s/etc/shadow"
	# A commit identity and safe.directory = *, since hooks commit in
	# /workspace, which the host owns.
	cat >"$s/etc/gitconfig" <<'GIT'
[user]
	name = agentbox
	email = agent@agentbox.invalid
[safe]
	directory = *
[init]
	defaultBranch = main
GIT
	chmod 644 "$s/etc/gitconfig"
	copy "$cli/node/node_modules/node-$platform/bin/node" "$s/usr/local/bin/node"
	copy "$cli/node/node_modules/npm" "$s/usr/local/lib/node_modules/npm"
	ln -s ../lib/node_modules/npm/bin/npm-cli.js "$s/usr/local/bin/npm"
	ln -s ../lib/node_modules/npm/bin/npx-cli.js "$s/usr/local/bin/npx"
	cat <<DOCKERFILE
COPY etc/passwd etc/group etc/gitconfig /etc/
COPY --chown=0:42 etc/shadow /etc/shadow
COPY usr/local /usr/local
COPY --chown=1000:1000 home/agent /home/agent
COPY --chown=1000:1000 workspace /workspace
ENV PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin \\
    HOME=/home/agent \\
    LANG=C.UTF-8 \\
    NPM_CONFIG_UPDATE_NOTIFIER=false
USER agent
WORKDIR /workspace
ENTRYPOINT ["/usr/bin/tini", "--"]
CMD ["bash"]
LABEL dev.agentbox.node-version="$NODE_VERSION"
DOCKERFILE
}

fill_full() {
	copy "$go_dir/go" "$1/go"
	cat <<DOCKERFILE
COPY go /usr/local/go
ENV PATH=/usr/local/go/bin:/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin \\
    GOTOOLCHAIN=local
LABEL dev.agentbox.go-version="$GO_VERSION"
DOCKERFILE
}

# execute_only SRC DST puts the program a CLI runs as (its native binary,
# or the interpreter of a CLI written as a script) at DST, execute-only
# (0711, root's in the image). The kernel makes a process of a program its
# user cannot read non-dumpable, so the agent's processes, the CLI's own
# children under the same user, can neither open the CLI's /proc/PID/fd
# (its stdout: forged output; its stdin: forged input), nor read or write
# its memory, nor read its environment, nor ptrace it; what the CLI spawns
# is dumpable again only when it runs another program. Every CLI image
# uses it. A copy of its own, since the mode goes into the image with it
# (copy hard-links the cache's files).
execute_only() {
	rm -f "$2"
	cp "$1" "$2"
	chmod 0711 "$2"
}

claude_version="" # the version fill_claude installs
fill_claude() {
	execute_only "$cli/claude-$claude_version/node_modules/@anthropic-ai/claude-code-$platform/claude" "$1/claude"
	cat <<DOCKERFILE
COPY claude /usr/local/bin/claude
CMD ["claude", "--version"]
LABEL dev.agentbox.claude-version="$claude_version"
DOCKERFILE
}

# The CLIs that are more than one file go to /opt/NAME, linked from
# /usr/local/bin by a relative link inside a copied folder (the builder
# cannot COPY a link to a file outside the build context).
fill_codex() {
	local vendor bin
	vendor="$cli/codex/node_modules/@openai/codex-$platform/vendor/$(codex_triple)"
	mkdir -p "$1/opt" "$1/usr/local/bin"
	copy "$vendor" "$1/opt/codex"
	# The CLI and the helper it runs for code mode.
	for bin in codex codex-code-mode-host; do
		[ -f "$vendor/bin/$bin" ] && execute_only "$vendor/bin/$bin" "$1/opt/codex/bin/$bin"
	done
	ln -s ../../../opt/codex/bin/codex "$1/usr/local/bin/codex"
	cat <<DOCKERFILE
COPY opt /opt
COPY usr /usr
CMD ["codex", "--version"]
LABEL dev.agentbox.codex-version="$CODEX_VERSION"
DOCKERFILE
}

# The Gemini CLI is a Node.js program: it runs on a Node.js of its own,
# execute-only, started by a launcher (its scripts stay readable, and the
# agent's node is the base's).
fill_gemini() {
	mkdir -p "$1/opt/gemini-cli" "$1/usr/local/bin"
	copy "$cli/gemini/node_modules" "$1/opt/gemini-cli/node_modules"
	execute_only "$cli/node/node_modules/node-$platform/bin/node" "$1/opt/gemini-cli/node"
	printf '#!/bin/sh\nexec /opt/gemini-cli/node /opt/gemini-cli/node_modules/@google/gemini-cli/bundle/gemini.js "$@"\n' >"$1/usr/local/bin/gemini"
	chmod 0755 "$1/usr/local/bin/gemini"
	cat <<DOCKERFILE
COPY opt /opt
COPY usr /usr
CMD ["gemini", "--version"]
LABEL dev.agentbox.gemini-version="$GEMINI_VERSION"
DOCKERFILE
}

fill_opencode() {
	execute_only "$cli/opencode/node_modules/$(opencode_package)/bin/opencode" "$1/opencode"
	cat <<DOCKERFILE
COPY opencode /usr/local/bin/opencode
CMD ["opencode", "--version"]
LABEL dev.agentbox.opencode-version="$OPENCODE_VERSION"
DOCKERFILE
}

# The desktop image: the base's files and Claude Code on the desktop's root
# filesystem, with its supervisor (images/desktop/agentbox-desktop).
# DISPLAY names its X display for every process of the sandbox.
fill_desktop() {
	local rootfs=$desktop_rootfs # fill_base takes the users from it
	fill_base "$1"
	claude_version=$CLAUDE_VERSION
	fill_claude "$1"
	cp images/desktop/agentbox-desktop "$1/agentbox-desktop"
	chmod 0755 "$1/agentbox-desktop"
	cat <<DOCKERFILE
COPY agentbox-desktop /usr/local/bin/agentbox-desktop
ENV DISPLAY=:1
CMD ["agentbox-desktop", "--help"]
DOCKERFILE
}

# The quick check of the design, and the tools.
check_base='test "$(id -u)" = 1000; test "$(pwd)" = /workspace
test "$(node --version)" = "v'$NODE_VERSION'"; npm --version >/dev/null; python3 --version >/dev/null
git --version >/dev/null; curl --version >/dev/null'

base=$(image_name base)
build "$base" "$rootfs_image" "$rootfs_hash" "node $NODE_VERSION npm $NPM_VERSION $platform" "$check_base" fill_base
base_hash=$(label_of "$base")
full=$(image_name base-full)
if wanted base-full; then
	build "$full" "$base" "$base_hash" "go $GO_VERSION $arch" \
		"$check_base"'; go version | grep -qF "go'$GO_VERSION' "' fill_full
fi
if wanted claude; then
	for claude_version in $(claude_versions); do
		build "$(image_name claude "$claude_version")" "$base" "$base_hash" "claude $claude_version $platform" \
			"$check_base"'; test "$(claude --version)" = "'$claude_version' (Claude Code)"; test ! -r /usr/local/bin/claude' fill_claude
	done
	retag "$(image_name claude "$CLAUDE_VERSION")" "$(image_name claude)"
fi
if wanted claude-full; then
	claude_version=$CLAUDE_VERSION
	build "$(image_name claude-full)" "$full" "$(label_of "$full")" "claude $claude_version $platform" \
		"$check_base"'; go version >/dev/null; test "$(claude --version)" = "'$claude_version' (Claude Code)"; test ! -r /usr/local/bin/claude' fill_claude
fi
if wanted codex; then
	build "$(image_name codex)" "$base" "$base_hash" "codex $CODEX_VERSION $platform" \
		"$check_base"'; test "$(codex --version)" = "codex-cli '$CODEX_VERSION'"; test ! -r /opt/codex/bin/codex' fill_codex
fi
if wanted gemini; then
	build "$(image_name gemini)" "$base" "$base_hash" "gemini $GEMINI_VERSION $platform" \
		"$check_base"'; test "$(gemini --version)" = "'$GEMINI_VERSION'"; test ! -r /opt/gemini-cli/node; test -r /usr/local/bin/node' fill_gemini
fi
if wanted opencode; then
	build "$(image_name opencode)" "$base" "$base_hash" "opencode $OPENCODE_VERSION $(opencode_package)" \
		"$check_base"'; test "$(opencode --version)" = "'$OPENCODE_VERSION'"; test ! -r /usr/local/bin/opencode' fill_opencode
fi

if wanted desktop; then
	wait "$desktop_rootfs_job" || die "the desktop's root filesystem was not made (see the debootstrap error above)"
	desktop_rootfs_image="$(image_name rootfs "$desktop_rootfs_hash")"
	import_rootfs "$desktop_rootfs" "$desktop_rootfs_image"
	# The smoke test starts the whole desktop and takes a screenshot.
	build "$(image_name desktop)" "$desktop_rootfs_image" "$desktop_rootfs_hash" \
		"node $NODE_VERSION npm $NPM_VERSION claude $CLAUDE_VERSION $platform desktop $(sha256sum images/desktop/agentbox-desktop | cut -c1-16)" \
		"$check_base"'; test "$(claude --version)" = "'$CLAUDE_VERSION' (Claude Code)"; test ! -r /usr/local/bin/claude
agentbox-desktop start --timeout 90 >/dev/null; agentbox-desktop screenshot /tmp/s.png >/dev/null; test "$(head -c 4 /tmp/s.png | tail -c 3)" = PNG
test -r /usr/share/novnc/vnc.html' fill_desktop
fi

# Replaced images are dangling now: remove them (newest first, so children
# go before their parents) unless a tag or a container still uses them.
for ((i = ${#replaced[@]} - 1; i >= 0; i--)); do
	id=${replaced[$i]}
	[ "$(timeout 20 docker image inspect --format '{{len .RepoTags}}' "$id" 2>/dev/null)" = 0 ] &&
		timeout 60 docker rmi "$id" >/dev/null 2>&1 || true
done
if [ ${#built[@]} -gt 0 ]; then
	log "built ${#built[@]} image(s): ${built[*]}"
fi
