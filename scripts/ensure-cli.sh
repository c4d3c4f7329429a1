#!/usr/bin/env bash
# Install the pinned coding-agent CLIs and tools (scripts/versions.sh) for
# the host tests and the sandbox images:
#
#   .cache/bin/claude            Claude Code, the pinned version (AGENTBOX_CLAUDE_BIN)
#   .cache/bin/claude-VERSION    Claude Code, each supported version
#   .cache/bin/codex             Codex CLI (native; its package folder is .cache/opt/codex)
#   .cache/bin/opencode          opencode (native)
#   .cache/bin/gemini            Gemini CLI (.cache/opt/gemini-cli), run by .cache/bin/node
#   .cache/bin/node              Node.js (the images' Node)
#   .cache/npm                   typescript and the OpenAI-ecosystem clients (NODE_PATH, AGENTBOX_TSC)
#   .cache/web                   the web app's npm packages (web/bundle bundles them)
#   .cache/cli/sdk               the Claude Agent SDK's type declarations, whose
#                                SDKMessage the claude parser is checked against
#                                (AGENTBOX_CLAUDE_SDK)
#
# Each npm install lives in $AGENTBOX_CACHE/npm-NAME-KEY (KEY: a hash of
# its package specs and platform), shared by every clone and built once
# under a lock; .cache/cli/NAME links to it, and scripts/build-image.sh
# copies the images' files from there. Install scripts never run: the
# native binaries ship in platform packages (optional dependencies), which
# are used directly.
#
# What .cache/bin holds are files of the clone (hard links, or copies
# across file systems), not links into $AGENTBOX_CACHE: the local runtime
# mounts them into sandboxes whose user cannot traverse $HOME (/root is
# 0700). Safe to run twice: an up-to-date install is left alone.
set -euo pipefail
cd "$(dirname "$0")/.."
. scripts/common.sh

platform=$(npm_platform)

# The installs: NAME, a file each must hold (under node_modules), specs;
# flags[i] are npm flags of install i (wantflags sets those of the next).
names=() checks=() specs=() flags=()
next_flags=""
want() {
	names+=("$1")
	checks+=("$2")
	shift 2
	specs+=("$*")
	flags+=("$next_flags")
	next_flags=""
}
wantflags() { next_flags="$*"; }
for v in $(claude_versions); do
	want "claude-$v" "@anthropic-ai/claude-code-$platform/claude" "@anthropic-ai/claude-code@$v"
done
want codex "@openai/codex-$platform/vendor/$(codex_triple)/bin/codex" "@openai/codex@$CODEX_VERSION"
want gemini "@google/gemini-cli/bundle/gemini.js" "@google/gemini-cli@$GEMINI_VERSION"
want opencode "$(opencode_package)/bin/opencode" "opencode-ai@$OPENCODE_VERSION"
want node "node-$platform/bin/node" "node-$platform@$NODE_VERSION" "npm@$NPM_VERSION"
want tools "typescript/bin/tsc" "typescript@$TYPESCRIPT_VERSION" "openai@$OPENAI_VERSION" "ai@$AI_VERSION" \
	"@ai-sdk/openai@$AI_SDK_OPENAI_VERSION" "@ai-sdk/openai-compatible@$AI_SDK_OPENAI_COMPATIBLE_VERSION" \
	"@langchain/openai@$LANGCHAIN_OPENAI_VERSION" "@langchain/core@$LANGCHAIN_CORE_VERSION" \
	"@readme/openapi-parser@$OPENAPI_PARSER_VERSION"
want web "@xterm/addon-fit/package.json" "preact@$PREACT_VERSION" "markdown-it@$MARKDOWN_IT_VERSION" \
	"highlight.js@$HIGHLIGHT_JS_VERSION" "@xterm/xterm@$XTERM_VERSION" "@xterm/addon-fit@$XTERM_FIT_VERSION"
# Only the declarations are read: not its platform binary (a copy of the
# CLI) nor its peers.
wantflags --omit=optional --omit=peer
want sdk "@anthropic-ai/claude-agent-sdk/sdk.d.ts" "@anthropic-ai/claude-agent-sdk@$CLAUDE_AGENT_SDK_VERSION"

shared_of() { echo "$AGENTBOX_CACHE/npm-$1-$(key_of "$2 $platform${3:+ $3}")"; }

# What the clone gets, as "KIND PATH SOURCE" (PATH under .cache, SOURCE
# under .cache/cli): file (a hard link or a copy), tree (a folder of
# those), link (a symbolic link to PATH's target inside .cache).
places=()
for v in $(claude_versions); do
	places+=("file bin/claude-$v claude-$v/node_modules/@anthropic-ai/claude-code-$platform/claude")
done
places+=(
	"file bin/claude claude-$CLAUDE_VERSION/node_modules/@anthropic-ai/claude-code-$platform/claude"
	"file bin/opencode opencode/node_modules/$(opencode_package)/bin/opencode"
	"file bin/node node/node_modules/node-$platform/bin/node"
	"tree opt/codex codex/node_modules/@openai/codex-$platform/vendor/$(codex_triple)"
	"link bin/codex ../opt/codex/bin/codex"
	"tree opt/gemini-cli gemini"
)
gemini_wrapper="#!/bin/sh
# Gemini CLI $GEMINI_VERSION, run by the cached Node.js $NODE_VERSION (scripts/ensure-cli.sh).
bin=\$(dirname \"\$(readlink -f \"\$0\")\")
exec \"\$bin/node\" \"\$bin/../opt/gemini-cli/node_modules/@google/gemini-cli/bundle/gemini.js\" \"\$@\"
"
# The state of a complete install: .cache/bin/.installed holds it.
state=$(key_of "${specs[*]} ${flags[*]} $platform ${places[*]} $gemini_wrapper")

up_to_date() {
	local i
	[ "$(cat .cache/bin/.installed 2>/dev/null)" = "$state" ] || return 1
	for i in "${!names[@]}"; do
		[ "$(readlink ".cache/cli/${names[$i]}" 2>/dev/null)" = "$(shared_of "${names[$i]}" "${specs[$i]}" "${flags[$i]}")" ] &&
			[ -e ".cache/cli/${names[$i]}/node_modules/${checks[$i]}" ] || return 1
	done
	[ "$(readlink .cache/npm 2>/dev/null)" = cli/tools ] || return 1
	[ "$(readlink .cache/web 2>/dev/null)" = cli/web ] || return 1
	for b in $(for v in $(claude_versions); do echo "claude-$v"; done) claude codex gemini opencode node; do
		[ -x ".cache/bin/$b" ] || return 1
	done
}

# npm_install NAME CHECK SPECS [FLAGS] installs SPECS into the shared cache
# unless they are there.
npm_install() {
	local name=$1 check=$2 spec=$3 extra=${4:-} shared
	shared=$(shared_of "$name" "$spec" "$extra")
	[ -e "$shared/node_modules/$check" ] && return 0
	if ! command -v npm >/dev/null 2>&1; then
		apt_install nodejs npm
	fi
	rm -rf "$shared.tmp"
	mkdir -p "$shared.tmp"
	printf '{\n  "name": "agentbox-%s",\n  "private": true\n}\n' "$name" >"$shared.tmp/package.json"
	log "npm install $spec"
	# shellcheck disable=SC2086 # spec and extra are lists of words
	npm install --prefix "$shared.tmp" --no-audit --no-fund --ignore-scripts --loglevel=error $extra $spec >&2 ||
		die "npm install $spec failed (is the npm registry reachable? npm config get registry: $(npm config get registry 2>/dev/null))"
	[ -e "$shared.tmp/node_modules/$check" ] ||
		die "npm install $spec did not install node_modules/$check (is there a $platform build of it?)"
	rm -rf "$shared"
	mv "$shared.tmp" "$shared"
}

# `ensure-cli.sh web` installs only the web app's packages (make web,
# which make build runs): building the binary needs no coding-agent CLI.
if [ "${1:-}" = web ]; then
	for i in "${!names[@]}"; do
		if [ "${names[$i]}" = web ]; then
			with_lock npm npm_install web "${checks[$i]}" "${specs[$i]}"
			mkdir -p .cache/cli
			ln -sfn "$(shared_of web "${specs[$i]}")" .cache/cli/web
			ln -sfn cli/web .cache/web
			log "web app packages in .cache/web (preact $PREACT_VERSION, markdown-it $MARKDOWN_IT_VERSION, highlight.js $HIGHLIGHT_JS_VERSION, xterm $XTERM_VERSION)"
		fi
	done
	exit 0
fi

if up_to_date; then
	log "CLIs up to date in .cache/bin (claude $(claude_versions), codex $CODEX_VERSION, gemini $GEMINI_VERSION, opencode $OPENCODE_VERSION, node $NODE_VERSION)"
	exit 0
fi
install_all() {
	local i
	for i in "${!names[@]}"; do
		npm_install "${names[$i]}" "${checks[$i]}" "${specs[$i]}" "${flags[$i]}"
	done
}
with_lock npm install_all
mkdir -p .cache/cli .cache/bin .cache/opt
rm -f .cache/bin/.installed
for i in "${!names[@]}"; do
	ln -sfn "$(shared_of "${names[$i]}" "${specs[$i]}" "${flags[$i]}")" ".cache/cli/${names[$i]}"
done
# .cache/npm was a folder (or another install) before: it is a link now.
[ -L .cache/npm ] || rm -rf .cache/npm
ln -sfn cli/tools .cache/npm
ln -sfn cli/web .cache/web
for p in "${places[@]}"; do
	read -r kind path source <<<"$p"
	rm -rf ".cache/$path"
	case $kind in
	file) ln ".cache/cli/$source" ".cache/$path" 2>/dev/null || cp ".cache/cli/$source" ".cache/$path" ;;
	tree) cp -al ".cache/cli/$source/." ".cache/$path" 2>/dev/null || { rm -rf ".cache/$path" && cp -a ".cache/cli/$source/." ".cache/$path"; } ;;
	link) ln -s "$source" ".cache/$path" ;;
	esac
done
printf '%s' "$gemini_wrapper" >.cache/bin/gemini
chmod 755 .cache/bin/gemini
for b in $(for v in $(claude_versions); do echo "claude-$v"; done) codex gemini opencode node; do
	log "installed .cache/bin/$b: $(".cache/bin/$b" --version 2>&1 | head -n1)"
done
echo "$state" >.cache/bin/.installed
