#!/bin/sh
# Lists the files to review: changed since the last commit, or every
# tracked file in a repository without commits. Outside a git repository,
# every file under the current folder.
set -eu
if ! git rev-parse --is-inside-work-tree >/dev/null 2>&1; then
	find . -type f -not -path './.git/*' -not -path './.claude/*' -not -path './.agentbox/*' | sort
	exit 0
fi
if git rev-parse --verify HEAD >/dev/null 2>&1; then
	{ git diff --name-only HEAD; git ls-files --others --exclude-standard; } | sort -u
else
	git ls-files --cached --others --exclude-standard | sort -u
fi
