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

# The example app keeps its data in ./data (app.jsonc data_root).
data="$APP/data/workspaces/demo/$chat"
say "Files the agent made in the chat's workspace ($data)"
ls -la "$data"
for f in "$data"/*.sh; do
	[ -f "$f" ] || continue
	echo "--- $(basename "$f")"
	cat "$f"
done
if [ -d "$data/.git" ]; then
	echo "--- git log (commits made by the Next hook)"
	git -C "$data" -c safe.directory='*' log --oneline
fi

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
	ls -la "$APP/data/workspaces/demo/$chat-$agent"
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
curl -fsSN "http://127.0.0.1:$port/v1/chat/completions" -H 'Content-Type: application/json' \
	-d '{"model": "qa", "stream": true, "messages": [{"role": "user", "content": "What is agentbox?"}]}'
say "Done: the coder ran in a $runtime sandbox, the Q&A assistant answered over HTTP"
