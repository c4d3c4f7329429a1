#!/usr/bin/env bash
# The main job, end to end and offline: the example app's coding assistant
# runs the real Claude Code CLI in a sandbox (Docker when an engine answers,
# otherwise the local bubblewrap runtime) against a scripted model; then the
# plain Q&A assistant answers through the OpenAI-compatible HTTP API.
set -euo pipefail
cd "$(dirname "$0")/.."

BIN=${BIN:-bin/agentbox}
APP=${APP:-examples/app}
export AGENTBOX_CLAUDE_BIN=${AGENTBOX_CLAUDE_BIN:-$PWD/.cache/bin/claude}

say() { printf '\n\033[1m== %s\033[0m\n' "$*"; }

say "Checking the example app ($APP)"
"$BIN" check --app "$APP"

runtime=local
if scripts/ensure-docker.sh >/tmp/agentbox-demo-docker.log 2>&1; then
	if make --no-print-directory image >/tmp/agentbox-demo-image.log 2>&1; then
		runtime=docker
	else
		echo "The sandbox image did not build (see /tmp/agentbox-demo-image.log); using the local runtime."
	fi
else
	echo "No Docker engine could be started (see /tmp/agentbox-demo-docker.log); using the local runtime (bubblewrap)."
fi
say "Sandbox runtime: $runtime"

chat="demo-$(date +%Y%m%d-%H%M%S)"
say "Running the coder assistant (chat $chat)"
"$BIN" run --app "$APP" --runtime "$runtime" --user demo --chat "$chat" coder \
	"Write a small program that greets the user, run it, and remember how to use it."

say "A follow-up in the same chat: the agent resumes its session and workspace"
"$BIN" run --app "$APP" --runtime "$runtime" --user demo --chat "$chat" coder \
	"Now make it greet me by name."

# The chat's workspace is a disk image mounted only while something uses
# it; `workspaces mount -- COMMAND` mounts it, runs COMMAND inside and
# unmounts it again. Files belong to the sandbox's user (uid 1000).
say "Files the agent made in the chat's workspace"
echo "\$ agentbox workspaces mount --app $APP --user demo --chat $chat -- ..."
"$BIN" workspaces mount --app "$APP" --user demo --chat "$chat" -- sh -c '
	ls -ln --time-style=+ . | grep -v " \.agentbox$"
	for f in *.sh; do [ -f "$f" ] && { echo "--- $f"; cat "$f"; }; done
	[ -d .git ] && { echo "--- git log (a commit per turn, made by the Next hook)"; git -c safe.directory="*" log --oneline; }
	true'

# DEMO_AGENTS="codex gemini opencode" (make demo DEMO_AGENTS=...) also runs
# the example app's assistants for those coding agents, each in its own
# sandbox image (Docker only), on its scripted connector.
for agent in ${DEMO_AGENTS:-}; do
	if [ "$runtime" != docker ]; then
		echo "DEMO_AGENTS needs the Docker runtime (each agent has its own image); skipping $agent."
		continue
	fi
	say "Running the $agent assistant (chat $chat-$agent)"
	"$BIN" run --app "$APP" --runtime docker --user demo --chat "$chat-$agent" "$agent" \
		"Write a small program that greets the user, run it, and remember how to use it."
	"$BIN" workspaces mount --app "$APP" --user demo --chat "$chat-$agent" -- ls -ln --time-style=+ .
done

say "Asking the Q&A assistant through the OpenAI-compatible API"
port=$(( 20000 + RANDOM % 20000 ))
"$BIN" serve --app "$APP" --runtime "$runtime" --addr "127.0.0.1:$port" >/tmp/agentbox-demo-serve.log 2>&1 &
server=$!
trap 'kill $server 2>/dev/null || true; wait $server 2>/dev/null || true' EXIT
for _ in $(seq 1 100); do
	curl -fsS "http://127.0.0.1:$port/health" >/dev/null 2>&1 && break
	sleep 0.1
done
echo "\$ curl http://127.0.0.1:$port/v1/chat/completions --json '{\"model\": \"qa\", \"stream\": true, ...}'"
body='{"model": "qa", "stream": true, "messages": [{"role": "user", "content": "What is agentbox?"}]}'
if [ -n "${DEMO_STREAM:-}" ]; then
	curl -fsSN "http://127.0.0.1:$port/v1/chat/completions" -H 'Content-Type: application/json' -d "$body"
else
	# The stream's text deltas joined (DEMO_STREAM=1 shows the raw stream).
	curl -fsSN "http://127.0.0.1:$port/v1/chat/completions" -H 'Content-Type: application/json' -d "$body" |
		sed -n 's/^data: .*"delta":{[^}]*"content":"\(\([^"\\]\|\\.\)*\)".*/\1/p' |
		while IFS= read -r delta; do printf '%b' "$delta"; done
	echo
fi
say "Done: the coder ran in a $runtime sandbox, the Q&A assistant answered over HTTP"
echo "Next:"
next() { printf '  %s\n      %s\n' "$1" "$2"; }
next "$BIN serve --app $APP" "the chat API and the web app, on http://127.0.0.1:8080"
next "$BIN shell --app $APP --user demo --chat $chat" "a shell in this chat's sandbox, with its workspace"
next "$BIN init myapp" "your own app, offline (README: Your first assistant)"
next "make demo DEMO_AGENTS=\"codex gemini opencode\"" "the same with the other agent CLIs"
