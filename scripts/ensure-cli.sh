#!/usr/bin/env bash
# Install the Claude Code CLI (and the openai and typescript npm packages
# the tests use)
# into .cache/npm and link the native binary at .cache/bin/claude.
# Safe to run twice: an up-to-date install is left alone.
set -euo pipefail
cd "$(dirname "$0")/.."
. scripts/common.sh

dir=.cache/npm
platform=$(claude_platform)
pkg=$dir/node_modules/@anthropic-ai/claude-code-$platform
link=.cache/bin/claude

installed_version() {
	sed -n 's/^ *"version": *"\([^"]*\)".*/\1/p' "$1/package.json" 2>/dev/null | head -n1
}

if [ -x "$pkg/claude" ] && [ "$(installed_version "$pkg")" = "$CLAUDE_VERSION" ] &&
	[ "$(installed_version "$dir/node_modules/openai")" = "$OPENAI_VERSION" ] &&
	[ "$(installed_version "$dir/node_modules/typescript")" = "$TYPESCRIPT_VERSION" ] &&
	[ "$(readlink "$link" 2>/dev/null)" = "../npm/node_modules/@anthropic-ai/claude-code-$platform/claude" ]; then
	log "Claude Code CLI $CLAUDE_VERSION already installed ($link)"
	exit 0
fi

if ! command -v npm >/dev/null 2>&1; then
	apt_install nodejs npm
fi

mkdir -p "$dir" .cache/bin
[ -f "$dir/package.json" ] || printf '{\n  "name": "agentbox-tools",\n  "private": true\n}\n' >"$dir/package.json"
log "npm install @anthropic-ai/claude-code@$CLAUDE_VERSION openai@$OPENAI_VERSION typescript@$TYPESCRIPT_VERSION"
# Install scripts are not needed: the native binary ships in the platform
# package (an optional dependency), which is used directly.
npm install --prefix "$dir" --no-audit --no-fund --ignore-scripts --loglevel=error \
	"@anthropic-ai/claude-code@$CLAUDE_VERSION" "openai@$OPENAI_VERSION" "typescript@$TYPESCRIPT_VERSION" >&2
[ -x "$pkg/claude" ] || die "npm did not install the native CLI at $pkg/claude (is @anthropic-ai/claude-code-$platform available for this machine?)"
ln -sfn "../npm/node_modules/@anthropic-ai/claude-code-$platform/claude" "$link"
log "installed $("$link" --version 2>/dev/null | head -n1) at $link"
