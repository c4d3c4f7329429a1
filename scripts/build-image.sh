#!/usr/bin/env bash
# Build the sandbox image agentbox/sandbox-claude:latest offline: no image
# registry is needed. A Debian bookworm userland from debootstrap (cached in
# $AGENTBOX_CACHE/rootfs-KEY) is imported as a base image; a small build stage adds the
# non-root user "agent" (uid/gid 1000), the Claude Code CLI's native binary,
# /etc/gitconfig and /workspace. The image is labelled with a hash of its
# inputs, and the build is skipped when an image with that hash exists.
# images/claude/Dockerfile builds the same image from a registry.
set -euo pipefail
cd "$(dirname "$0")/.."
. scripts/common.sh

# One image build at a time on this machine (images are machine-wide).
if [ -z "${AGENTBOX_IMAGE_LOCKED:-}" ]; then
	AGENTBOX_IMAGE_LOCKED=1 with_lock image "$0" "$@"
	exit
fi

image="${AGENTBOX_CLAUDE_IMAGE:-agentbox/sandbox-claude:latest}"
suite=bookworm
mirror="${DEBIAN_MIRROR:-http://deb.debian.org/debian}"
packages="bash,coreutils,git,ca-certificates,tini,nodejs,procps"
stage=.cache/image-build
platform=$(claude_platform)
claude=".cache/npm/node_modules/@anthropic-ai/claude-code-$platform/claude"
label=dev.agentbox.image.inputs

scripts/ensure-docker.sh
scripts/ensure-cli.sh

rootfs_key="$suite $packages $mirror"
# The root filesystem lives in the shared cache, keyed by its inputs;
# .cache/rootfs links to it (images/cursor/build.sh reads it there).
rootfs="$AGENTBOX_CACHE/rootfs-$(key_of "$rootfs_key")"
mkdir -p .cache
[ -L .cache/rootfs ] || rm -rf .cache/rootfs
ln -sfn "$rootfs" .cache/rootfs
inputs=$(
	{
		cat "$0" scripts/common.sh
		echo "$rootfs_key"
		echo "claude $CLAUDE_VERSION $platform"
	} | sha256sum | cut -c1-16
)
current=$(timeout 20 docker image inspect --format "{{ index .Config.Labels \"$label\" }}" "$image" 2>/dev/null || true)
if [ "$current" = "$inputs" ]; then
	log "image $image is up to date (inputs $inputs)"
	exit 0
fi
start=$(date +%s)
previous=$(timeout 20 docker image inspect --format '{{.Id}}' "$image" 2>/dev/null || true)

# 1. Root filesystem (the slow part, cached across builds).
if [ "$(cat "$rootfs/.agentbox-rootfs" 2>/dev/null)" != "$rootfs_key" ]; then
	command -v debootstrap >/dev/null 2>&1 || apt_install debootstrap
	log "debootstrap $suite ($packages) into $rootfs"
	rm -rf "$rootfs.tmp"
	as_root debootstrap --variant=minbase --include="$packages" "$suite" "$rootfs.tmp" "$mirror" >"$AGENTBOX_CACHE/debootstrap.log" 2>&1 ||
		{ tail -n 20 "$AGENTBOX_CACHE/debootstrap.log" >&2; die "debootstrap failed (full log: $AGENTBOX_CACHE/debootstrap.log)"; }
	# Trim what a sandbox never needs.
	rm -rf "$rootfs.tmp"/var/cache/apt/archives/*.deb "$rootfs.tmp"/var/lib/apt/lists/* \
		"$rootfs.tmp"/usr/share/doc/* "$rootfs.tmp"/usr/share/man/*
	echo "$rootfs_key" >"$rootfs.tmp/.agentbox-rootfs"
	rm -rf "$rootfs"
	mv "$rootfs.tmp" "$rootfs"
fi

# 2. Base image from the root filesystem.
base_tag=$(printf '%s' "$rootfs_key" | sha256sum | cut -c1-12)
base="agentbox/sandbox-base:$base_tag"
if ! timeout 20 docker image inspect "$base" >/dev/null 2>&1; then
	log "docker import $base"
	tar -C "$rootfs" --exclude=./.agentbox-rootfs --numeric-owner -c . | docker import - "$base" >/dev/null
fi

# 3. The image: files are prepared here and copied in, so the build runs no
# command in a container (no network is needed, none is configured).
rm -rf "$stage"
mkdir -p "$stage/etc" "$stage/home/agent" "$stage/workspace"
cp "$rootfs/etc/passwd" "$rootfs/etc/group" "$rootfs/etc/shadow" "$stage/etc/"
grep -q '^agent:' "$stage/etc/passwd" || echo 'agent:x:1000:1000:agent:/home/agent:/bin/bash' >>"$stage/etc/passwd"
grep -q '^agent:' "$stage/etc/group" || echo 'agent:x:1000:' >>"$stage/etc/group"
grep -q '^agent:' "$stage/etc/shadow" || echo 'agent:!:19000::::::' >>"$stage/etc/shadow"
chmod 644 "$stage/etc/passwd" "$stage/etc/group"
chmod 640 "$stage/etc/shadow"
cat >"$stage/etc/gitconfig" <<'GIT'
[user]
	name = agentbox
	email = agent@agentbox.invalid
[safe]
	directory = *
[init]
	defaultBranch = main
GIT
chmod 644 "$stage/etc/gitconfig"
cp "$claude" "$stage/claude"
chmod 755 "$stage/claude"
cat >"$stage/Dockerfile" <<DOCKERFILE
FROM $base
COPY etc/passwd etc/group etc/gitconfig /etc/
COPY --chown=0:42 etc/shadow /etc/shadow
COPY claude /usr/local/bin/claude
COPY --chown=1000:1000 home/agent /home/agent
COPY --chown=1000:1000 workspace /workspace
ENV PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin \\
    HOME=/home/agent \\
    LANG=C.UTF-8
USER agent
WORKDIR /workspace
ENTRYPOINT ["/usr/bin/tini", "--"]
CMD ["claude", "--version"]
LABEL $label="$inputs" \\
      dev.agentbox.claude-version="$CLAUDE_VERSION"
DOCKERFILE
log "docker build $image"
if ! out=$(DOCKER_BUILDKIT=0 docker build --quiet --network none -t "$image" "$stage" 2>&1); then
	printf '%s\n' "$out" >&2
	die "docker build of $image failed"
fi
rm -rf "$stage"

# 4. Smoke test: the CLI runs as the non-root user.
out=$(timeout 60 docker run --rm --network none "$image" sh -c 'id -u; claude --version; git --version' 2>&1) ||
	die "the new image does not run: $out"
case "$out" in
1000*"$CLAUDE_VERSION"*git*) ;;
*) die "unexpected smoke test output from $image: $out" ;;
esac
# The replaced image is dangling now; remove it unless a container uses it.
if [ -n "$previous" ] && [ "$previous" != "$(docker image inspect --format '{{.Id}}' "$image")" ]; then
	timeout 20 docker rmi "$previous" >/dev/null 2>&1 || true
fi
log "built $image (inputs $inputs) in $(($(date +%s) - start))s"
