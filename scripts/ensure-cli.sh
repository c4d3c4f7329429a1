#!/usr/bin/env bash
# Install the Claude Code CLI (and the openai and typescript npm packages
# the tests use) into $AGENTBOX_CACHE/npm-KEY (KEY: a hash of the pinned
# versions), link it as .cache/npm and the native binary as .cache/bin/claude.
# Safe to run twice: an up-to-date install is left alone.
set -euo pipefail
cd "$(dirname "$0")/.."
. scripts/common.sh

platform=$(claude_platform)
specs=("@anthropic-ai/claude-code@$CLAUDE_VERSION" "openai@$OPENAI_VERSION" "typescript@$TYPESCRIPT_VERSION")
shared="$AGENTBOX_CACHE/npm-$(key_of "${specs[*]} $platform")"
dir=.cache/npm
pkg=$dir/node_modules/@anthropic-ai/claude-code-$platform
link=.cache/bin/claude

install() {
	[ -x "$shared/node_modules/@anthropic-ai/claude-code-$platform/claude" ] && return 0
	if ! command -v npm >/dev/null 2>&1; then
		apt_install nodejs npm
	fi
	rm -rf "$shared.tmp"
	mkdir -p "$shared.tmp"
	printf '{\n  "name": "agentbox-tools",\n  "private": true\n}\n' >"$shared.tmp/package.json"
	log "npm install ${specs[*]}"
	# Install scripts are not needed: the native binary ships in the platform
	# package (an optional dependency), which is used directly.
	npm install --prefix "$shared.tmp" --no-audit --no-fund --ignore-scripts --loglevel=error "${specs[@]}" >&2
	[ -x "$shared.tmp/node_modules/@anthropic-ai/claude-code-$platform/claude" ] ||
		die "npm did not install the native CLI (is @anthropic-ai/claude-code-$platform available for this machine?)"
	mv "$shared.tmp" "$shared"
}

# The binary is linked into the clone as a file (a hard link, or a copy
# across file systems), not a symlink: the local runtime mounts it into
# sandboxes whose user cannot traverse $HOME (/root is 0700).
if [ "$(readlink .cache/npm 2>/dev/null)" = "$shared" ] && [ -x "$pkg/claude" ] && [ ! -L "$link" ] &&
	[ "$link" -ef "$pkg/claude" ]; then
	log "Claude Code CLI $CLAUDE_VERSION already installed ($link)"
	exit 0
fi
with_lock npm install
mkdir -p .cache/bin
rm -rf .cache/npm
ln -sfn "$shared" .cache/npm
rm -f "$link"
ln "$shared/node_modules/@anthropic-ai/claude-code-$platform/claude" "$link" 2>/dev/null ||
	cp "$shared/node_modules/@anthropic-ai/claude-code-$platform/claude" "$link"
log "installed $("$link" --version 2>/dev/null | head -n1) at $link"
