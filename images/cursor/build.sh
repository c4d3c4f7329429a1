#!/usr/bin/env bash
# Build the sandbox image PREFIX/sandbox-cursor:latest (PREFIX:
# AGENTBOX_IMAGE_PREFIX, default agentbox) offline, on the base image of
# `make image` (PREFIX/sandbox-base:latest, built by scripts/build-image.sh
# when missing or out of date): a build stage adds the Cursor CLI in
# /opt/cursor-agent and its links in /usr/local/bin, without running
# anything in a container.
#
# The CLI comes from Cursor's official distribution: the installer at
# https://cursor.com/install is run on this machine with a staging HOME. It
# is not published on npm or apt, so a machine that cannot reach cursor.com
# cannot build the image; point CURSOR_AGENT_TARBALL at the package
# (agent-cli-package.tar.gz, as the installer downloads it) fetched
# elsewhere to build without network access.
#
# The image is labelled with a hash of its inputs (this script, the base
# image's hash, the CLI's source); the build is skipped when an image with
# that hash exists. images/cursor/Dockerfile builds the same image from a
# registry.
set -euo pipefail
cd "$(dirname "$0")/../.."
. scripts/common.sh

image="${AGENTBOX_CURSOR_IMAGE:-$(image_name cursor)}"
installer_url="${CURSOR_INSTALLER_URL:-https://cursor.com/install}"
tarball="${CURSOR_AGENT_TARBALL:-}"
stage=.cache/image-build-cursor
label=dev.agentbox.image.inputs

scripts/ensure-docker.sh

# 1. The base image (up to date: scripts/build-image.sh skips what is).
scripts/build-image.sh base
base=$(image_name base)
base_hash=$(timeout 20 docker image inspect --format "{{ index .Config.Labels \"$label\" }}" "$base")

# 2. The CLI package: from CURSOR_AGENT_TARBALL, else the official installer.
rm -rf "$stage"
mkdir -p "$stage/opt/cursor-agent" "$stage/usr/local/bin"
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
[ -f "$stage/opt/cursor-agent/node" ] || die "cannot build $image: the CLI package has no node beside cursor-agent (its launcher runs the package's own Node.js)"
chmod -R a+rX "$stage/opt/cursor-agent"
# The CLI runs on the package's Node.js, which is made execute-only (0711,
# root's in the image) as every CLI's program is (scripts/build-image.sh,
# execute_only): its processes are then not dumpable, so the agent's
# processes cannot write into its output, read its memory or ptrace it.
chmod 0711 "$stage/opt/cursor-agent/node"

inputs=$(
	{
		cat "$0" scripts/common.sh
		echo "$base_hash"
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

# 3. The image: files are prepared here and copied in. The links are
# relative and inside a copied folder (the builder cannot COPY a link to a
# file outside the build context).
ln -s ../../../opt/cursor-agent/cursor-agent "$stage/usr/local/bin/cursor-agent"
ln -s ../../../opt/cursor-agent/cursor-agent "$stage/usr/local/bin/agent"
rm -rf "$stage/install.sh" "$stage/curl.err" "$stage/install.log" "$stage/installer-home"
cat >"$stage/Dockerfile" <<DOCKERFILE
FROM $base
COPY opt /opt
COPY usr /usr
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

# 4. Smoke test: the CLI runs as the non-root user, its Node.js unreadable.
out=$(timeout 60 docker run --rm --network none "$image" sh -c 'id -u; test ! -r /opt/cursor-agent/node; cursor-agent --version; git --version' 2>&1) ||
	die "the new image does not run: $out"
case "$out" in
1000*git*) ;;
*) die "unexpected smoke test output from $image: $out" ;;
esac
log "built $image (inputs $inputs) in $(($(date +%s) - start))s"
