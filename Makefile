# agentbox: `make demo` runs the product on the example app, `make test`
# runs the whole test suite with its real parts (Docker engine, sandbox
# images, the coding-agent CLIs). Every target installs what it needs when
# missing and is cheap the second time. Versions: scripts/versions.sh.

SHELL := /usr/bin/env bash
.SHELLFLAGS := -euo pipefail -c
.DEFAULT_GOAL := build

export DEBIAN_FRONTEND := noninteractive
export PATH := $(PATH):/usr/local/go/bin

# Every pinned version (CLAUDE_VERSION, CLAUDE_LATEST_VERSION, CODEX_VERSION, ...).
include scripts/versions.sh

GO        ?= go
VERSION   ?= $(shell git describe --tags --always --dirty 2>/dev/null || echo dev)
LDFLAGS   := -s -w -X main.version=$(VERSION)
BIN       := bin/agentbox
APP       ?= examples/app
TEST_P    ?= 2
TEST_PKGS ?= ./...
# Docker images `make cluster` imports into the local cluster (the Gemini
# CLI's for the test of the pool's primed pods).
CLUSTER_IMAGES ?= $(IMAGE) $(AGENTBOX_GEMINI_IMAGE)
# make test starts the local cluster (CLUSTER=0: it does not).
CLUSTER   ?= 1
STATICCHECK ?= honnef.co/go/tools/cmd/staticcheck@v0.8.2

# Images are PREFIX/sandbox-NAME:TAG. Another prefix (make image
# AGENTBOX_IMAGE_PREFIX=agentbox-dev) builds and tests a separate set,
# leaving the product's agentbox/* images alone.
AGENTBOX_IMAGE_PREFIX ?= agentbox
IMAGE ?= $(AGENTBOX_IMAGE_PREFIX)/sandbox-claude:latest
export AGENTBOX_IMAGE_PREFIX

# What the tests find through internal/testenv: the CLIs of `make cli`...
export AGENTBOX_CLAUDE_BIN          := $(CURDIR)/.cache/bin/claude
export AGENTBOX_CLAUDE_VERSIONS     := $(CLAUDE_VERSION) $(filter-out $(CLAUDE_VERSION),$(CLAUDE_LATEST_VERSION))
export AGENTBOX_CLAUDE_LATEST_BIN   := $(CURDIR)/.cache/bin/claude-$(CLAUDE_LATEST_VERSION)
export AGENTBOX_CODEX_BIN           := $(CURDIR)/.cache/bin/codex
export AGENTBOX_GEMINI_BIN          := $(CURDIR)/.cache/bin/gemini
export AGENTBOX_OPENCODE_BIN        := $(CURDIR)/.cache/bin/opencode
export AGENTBOX_NODE_BIN            := $(CURDIR)/.cache/bin/node
export NODE_PATH                    := $(CURDIR)/.cache/npm/node_modules
export AGENTBOX_TSC                 := $(CURDIR)/.cache/npm/node_modules/.bin/tsc
export AGENTBOX_WEB_MODULES         := $(CURDIR)/.cache/web/node_modules
export AGENTBOX_CLAUDE_SDK          := $(CURDIR)/.cache/cli/sdk/node_modules/@anthropic-ai/claude-agent-sdk/sdk.d.ts
export AGENTBOX_KUBECONFIG          := $(CURDIR)/.cache/cluster/kubeconfig
# ... and the images of `make image` (AGENTBOX_IMAGES: all of them, for
# the image tests, and for `make cluster CLUSTER_IMAGES="$AGENTBOX_IMAGES"`).
export AGENTBOX_CLAUDE_IMAGE        := $(IMAGE)
export AGENTBOX_CLAUDE_LATEST_IMAGE := $(AGENTBOX_IMAGE_PREFIX)/sandbox-claude:$(CLAUDE_LATEST_VERSION)
export AGENTBOX_CODEX_IMAGE         := $(AGENTBOX_IMAGE_PREFIX)/sandbox-codex:latest
export AGENTBOX_GEMINI_IMAGE        := $(AGENTBOX_IMAGE_PREFIX)/sandbox-gemini:latest
export AGENTBOX_OPENCODE_IMAGE      := $(AGENTBOX_IMAGE_PREFIX)/sandbox-opencode:latest
export AGENTBOX_DESKTOP_IMAGE       := $(AGENTBOX_IMAGE_PREFIX)/sandbox-desktop:latest
export AGENTBOX_IMAGES              := $(shell AGENTBOX_IMAGE_PREFIX=$(AGENTBOX_IMAGE_PREFIX) scripts/build-image.sh --list)

.PHONY: help build web cli docker tools image image-cursor setup cluster cluster-down test gotest bench demo check clean distclean go

## go: Go itself is not installed here; say so clearly when it is missing
go:
	@command -v $(GO) >/dev/null || { echo "error: Go 1.26 not found (looked in PATH and /usr/local/go/bin); install it from https://go.dev/dl" >&2; exit 1; }

## build: the static agentbox binary at bin/agentbox, with the web app
build: go web
	CGO_ENABLED=0 $(GO) build -trimpath -ldflags '$(LDFLAGS)' -o $(BIN) ./cmd/agentbox

## web: the web app (web/src) bundled into web/dist, which the binary
##   embeds: esbuild's Go API with the npm packages pinned in
##   scripts/versions.sh (installed into .cache/web)
web: go
	scripts/ensure-cli.sh web
	$(GO) run ./web/bundle/cmd

## help: this list of targets
help:
	@sed -n 's/^## //p' $(MAKEFILE_LIST)

## cli: the coding-agent CLIs in .cache/bin (Claude Code pinned and latest,
##   Codex, Gemini CLI, opencode), Node.js 22, and the openai and typescript
##   npm packages the tests use; versions in scripts/versions.sh
cli:
	scripts/ensure-cli.sh

## docker: a Docker engine that answers (installed and started when missing),
##   with gVisor built (scripts/ensure-gvisor.sh, cached) and registered as
##   its runsc and runsc-hostnet runtimes (AGENTBOX_GVISOR=0: without)
docker: go
	scripts/ensure-docker.sh

## tools: host tools (bubblewrap, git) installed when missing
tools:
	scripts/ensure-tools.sh

## image: the sandbox images, built offline, each skipped when its inputs are
##   unchanged: sandbox-base, sandbox-base-full (+Go), sandbox-claude (:latest =
##   pinned, and one tag per supported version), sandbox-claude-full, sandbox-codex,
##   sandbox-gemini, sandbox-opencode, sandbox-desktop (Claude Code with a
##   desktop; its root filesystem is made beside the others'), all listed in
##   AGENTBOX_IMAGES; prefix AGENTBOX_IMAGE_PREFIX (default agentbox)
image: docker cli
	scripts/build-image.sh

## image-cursor: the Cursor sandbox image on sandbox-base (needs the Cursor
##   CLI's distribution, or CURSOR_AGENT_TARBALL pointing at its tarball); not
##   part of setup
image-cursor: docker
	images/cursor/build.sh

## setup: everything the integration tests and the demo need
setup: tools docker cli image

## cluster: the local single-node Kubernetes cluster (built on first use and
## cached in ~/.cache/agentbox), with the sandbox images imported; prints the
## path of its kubeconfig, .cache/cluster/kubeconfig
cluster: go image
	@AGENTBOX_CLUSTER_IMAGES='$(CLUSTER_IMAGES)' scripts/cluster/up.sh

## cluster-down: stop the local cluster and remove what its pods left
cluster-down:
	@scripts/cluster/down.sh

## test: the whole suite with real Docker, CLI, Kubernetes and a browser;
## fails if a container is left behind. Starts the local cluster when it is
## not up and stops it at the end (a cluster already up is left running).
test: go setup web
	scripts/check-leftovers.sh snapshot .cache/containers-before
	AGENTBOX_CLUSTER=$(CLUSTER) AGENTBOX_CLUSTER_IMAGES='$(CLUSTER_IMAGES)' \
		scripts/cluster/with.sh $(GO) test -p $(TEST_P) -timeout 30m $(TEST_PKGS)
	scripts/check-leftovers.sh check .cache/containers-before

## gotest: go test with the environment the suite uses (CLIs, images,
##   cluster config) and nothing else: no set-up, no cluster start, no
##   leftover check; for a developer's quick loop once `make setup` ran:
##   make gotest PKGS=./bridge/... ARGS='-run TestEgress -count=1'
PKGS ?= ./...
ARGS ?=
gotest: go
	$(GO) test $(ARGS) $(PKGS)

## bench: the benchmarks, with the same set-up as test
bench: go setup
	AGENTBOX_CLUSTER=$(CLUSTER) AGENTBOX_CLUSTER_IMAGES='$(CLUSTER_IMAGES)' \
		scripts/cluster/with.sh $(GO) test -p 1 -run '^$$' -bench . -benchmem $(TEST_PKGS)

## demo: the coding assistant end to end on the example app (offline, scripted
## model, real Claude Code CLI in a sandbox), then the Q&A assistant over HTTP
demo: build tools cli
	BIN=$(BIN) APP=$(APP) scripts/demo.sh

## check: gofmt, go mod tidy -diff, go vet and staticcheck (pinned; built
##   once into Go's cache, so later runs take seconds); product code imports
##   no test package
check: go
	@out=$$(gofmt -l $$(git ls-files '*.go')); if [ -n "$$out" ]; then echo "gofmt needed:"; echo "$$out"; exit 1; fi
	@$(GO) mod tidy -diff || { echo "go.mod/go.sum are not tidy: run go mod tidy" >&2; exit 1; }
	@GO=$(GO) scripts/check-testdeps.sh
	$(GO) vet ./...
	cd scripts/cluster && $(GO) vet ./cni-loopback
	$(GO) run $(STATICCHECK) ./...
	cd scripts/cluster && $(GO) run $(STATICCHECK) ./cni-loopback

## clean: remove build outputs (keeps the cached CLIs, root filesystem and images)
clean:
	rm -rf bin .cache/image-build .cache/image-build-cursor

## distclean: also remove .cache (links to the shared cache in
##   $HOME/.cache/agentbox, which stays, as do the images in Docker)
distclean: clean
	[ ! -d .cache/cluster ] || scripts/cluster/down.sh
	rm -rf .cache
