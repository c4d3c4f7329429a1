#!/usr/bin/env bash
# Fail when a container labelled by agentbox is left behind (a test that
# does not clean up after itself).
set -euo pipefail
left=$(timeout 20 docker ps -a --filter label=dev.agentbox.product --format '{{.ID}} {{.Names}} {{.Status}} {{.Label "dev.agentbox.instance"}}')
if [ -n "$left" ]; then
	printf 'error: containers left behind by the tests:\n%s\n' "$left" >&2
	exit 1
fi
echo "==> no agentbox container left behind" >&2
