#!/usr/bin/env bash
# Build the sandbox image agentbox/sandbox-cursor:latest offline, the same
# way scripts/build-image.sh builds the Claude image: the cached Debian root
# filesystem (.cache/rootfs, built by scripts/build-image.sh when missing) is
# the base image, and a build stage adds the user "agent" (uid/gid 1000),
# /etc/gitconfig, /workspace and the Cursor CLI, without running anything in
# a container.
#
# The CLI comes from Cursor's official distribution: the installer at
# https://cursor.com/install is run on this machine with a staging HOME. It
# is not published on npm or apt, so a machine that cannot reach cursor.com
# cannot build the image; point CURSOR_AGENT_TARBALL at the package
# (agent-cli-package.tar.gz, as the installer downloads it) fetched
# elsewhere to build without network access.
#
# The image is labelled with a hash of its inputs; the build is skipped when
# an image with that hash exists. images/cursor/Dockerfile builds the same
# image from a registry.
set -euo pipefail
cd "$(dirname "$0")/../.."
. scripts/common.sh

image="${AGENTBOX_CURSOR_IMAGE:-agentbox/sandbox-cursor:latest}"
installer_url="${CURSOR_INSTALLER_URL:-https://cursor.com/install}"
tarball="${CURSOR_AGENT_TARBALL:-}"
rootfs=.cache/rootfs
stage=.cache/image-build-cursor
label=dev.agentbox.image.inputs

scripts/ensure-docker.sh

# 1. The base image, shared with the Claude image.
if [ ! -s "$rootfs/.agentbox-rootfs" ]; then
	log "no cached root filesystem in $rootfs: building the Claude image first (scripts/build-image.sh)"
	scripts/build-image.sh
fi
rootfs_key=$(cat "$rootfs/.agentbox-rootfs")
base="agentbox/sandbox-base:$(printf '%s' "$rootfs_key" | sha256sum | cut -c1-12)"
if ! timeout 20 docker image inspect "$base" >/dev/null 2>&1; then
	log "docker import $base"
	tar -C "$rootfs" --exclude=./.agentbox-rootfs --numeric-owner -c . | docker import - "$base" >/dev/null
fi

# 2. The CLI package: from CURSOR_AGENT_TARBALL, else the official installer.
rm -rf "$stage"
mkdir -p "$stage/etc" "$stage/home/agent" "$stage/workspace" "$stage/opt/cursor-agent"
if [ -n "$tarball" ]; then
	[ -r "$tarball" ] || die "CURSOR_AGENT_TARBALL=$tarball is not a readable file"
	log "Cursor CLI from $tarball"
	tar -C "$stage/opt/cursor-agent" --strip-components=1 -xzf "$tarball" ||
		die "CURSOR_AGENT_TARBALL=$tarball is not the CLI package (a .tar.gz with one top folder holding cursor-agent)"
	source_desc="tarball $(sha256sum "$tarball" | cut -c1-16)"
else
	command -v curl >/dev/null 2>&1 || apt_install curl ca-certificates
	log "Cursor CLI from $installer_url"
	if ! curl -fsSL --connect-timeout 10 --max-time 60 "$installer_url" -o "$stage/install.sh" 2>"$stage/curl.err"; then
		die "cannot build $image: the Cursor CLI's distribution ($installer_url) is not reachable from this machine ($(tr -d '\n' <"$stage/curl.err")).
The Cursor CLI is only distributed by cursor.com (not npm or apt). Build on a machine that can reach cursor.com,
build images/cursor/Dockerfile where a registry and cursor.com are reachable, or set
CURSOR_AGENT_TARBALL=/path/to/agent-cli-package.tar.gz (the package the installer downloads) and run this script again."
	fi
	home="$PWD/$stage/installer-home"
	mkdir -p "$home"
	# The installer puts the CLI under $HOME/.local; HOME is a staging
	# folder, so nothing on this machine changes.
	if ! HOME="$home" SHELL=/bin/bash bash "$stage/install.sh" >"$stage/install.log" 2>&1; then
		tail -n 20 "$stage/install.log" >&2
		die "cannot build $image: the Cursor CLI installer failed (full log: $stage/install.log)"
	fi
	version_dir=$(ls -d "$home"/.local/share/cursor-agent/versions/*/ 2>/dev/null | sort | tail -n 1)
	[ -n "$version_dir" ] || die "cannot build $image: the installer finished but left no CLI under $home/.local/share/cursor-agent/versions"
	cp -a "$version_dir". "$stage/opt/cursor-agent/"
	source_desc="installer $(basename "$version_dir")"
fi
[ -x "$stage/opt/cursor-agent/cursor-agent" ] || die "cannot build $image: the CLI package has no executable cursor-agent"
chmod -R a+rX "$stage/opt/cursor-agent"

inputs=$(
	{
		cat "$0" scripts/common.sh
		echo "$rootfs_key"
		echo "cursor $source_desc"
	} | sha256sum | cut -c1-16
)
current=$(timeout 20 docker image inspect --format "{{ index .Config.Labels \"$label\" }}" "$image" 2>/dev/null || true)
if [ "$current" = "$inputs" ]; then
	rm -rf "$stage"
	log "image $image is up to date (inputs $inputs)"
	exit 0
fi
start=$(date +%s)

# 3. The image: files are prepared here and copied in.
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
mkdir -p "$stage/bin"
ln -s /opt/cursor-agent/cursor-agent "$stage/bin/cursor-agent"
ln -s /opt/cursor-agent/cursor-agent "$stage/bin/agent"
cat >"$stage/Dockerfile" <<DOCKERFILE
FROM $base
COPY etc/passwd etc/group etc/gitconfig /etc/
COPY --chown=0:42 etc/shadow /etc/shadow
COPY opt/cursor-agent /opt/cursor-agent
COPY bin/cursor-agent bin/agent /usr/local/bin/
COPY --chown=1000:1000 home/agent /home/agent
COPY --chown=1000:1000 workspace /workspace
ENV PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin \\
    HOME=/home/agent \\
    LANG=C.UTF-8
USER agent
WORKDIR /workspace
ENTRYPOINT ["/usr/bin/tini", "--"]
CMD ["cursor-agent", "--version"]
LABEL $label="$inputs" \\
      dev.agentbox.cursor-source="$source_desc"
DOCKERFILE
log "docker build $image"
if ! out=$(DOCKER_BUILDKIT=0 docker build --quiet --network none -t "$image" "$stage" 2>&1); then
	printf '%s\n' "$out" >&2
	die "docker build of $image failed"
fi
rm -rf "$stage"

# 4. Smoke test: the CLI runs as the non-root user.
out=$(timeout 60 docker run --rm --network none "$image" sh -c 'id -u; cursor-agent --version; git --version' 2>&1) ||
	die "the new image does not run: $out"
case "$out" in
1000*git*) ;;
*) die "unexpected smoke test output from $image: $out" ;;
esac
log "built $image (inputs $inputs) in $(($(date +%s) - start))s"
