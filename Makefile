# agentbox: `make demo` runs the product on the example app, `make test`
# runs the whole test suite with its real parts (Docker engine, sandbox
# image, Claude Code CLI). Every target installs what it needs when missing
# and is cheap the second time.

SHELL := /usr/bin/env bash
.SHELLFLAGS := -euo pipefail -c
.DEFAULT_GOAL := build

export DEBIAN_FRONTEND := noninteractive
export PATH := $(PATH):/usr/local/go/bin

GO        ?= go
VERSION   ?= $(shell git describe --tags --always --dirty 2>/dev/null || echo dev)
LDFLAGS   := -s -w -X main.version=$(VERSION)
BIN       := bin/agentbox
IMAGE     ?= agentbox/sandbox-claude:latest
APP       ?= examples/app
TEST_P    ?= 2
TEST_PKGS ?= ./...
# Docker images `make cluster` imports into the local cluster.
CLUSTER_IMAGES ?= $(IMAGE)
# make test starts the local cluster (CLUSTER=0: it does not).
CLUSTER   ?= 1

# What the tests find through internal/testenv.
export AGENTBOX_CLAUDE_BIN   := $(CURDIR)/.cache/bin/claude
export AGENTBOX_CLAUDE_IMAGE := $(IMAGE)
export NODE_PATH             := $(CURDIR)/.cache/npm/node_modules
export AGENTBOX_TSC          := $(CURDIR)/.cache/npm/node_modules/.bin/tsc
export AGENTBOX_KUBECONFIG   := $(CURDIR)/.cache/cluster/kubeconfig

.PHONY: build cli docker tools image image-cursor setup cluster cluster-down test bench demo check clean distclean go

## go: Go itself is not installed here; say so clearly when it is missing
go:
	@command -v $(GO) >/dev/null || { echo "error: Go 1.26 not found (looked in PATH and /usr/local/go/bin); install it from https://go.dev/dl" >&2; exit 1; }

## build: the static agentbox binary at bin/agentbox
build: go
	CGO_ENABLED=0 $(GO) build -trimpath -ldflags '$(LDFLAGS)' -o $(BIN) ./cmd/agentbox

## cli: Claude Code CLI (pinned) and the openai npm package in .cache
cli:
	scripts/ensure-cli.sh

## docker: a Docker engine that answers (installed and started when missing)
docker:
	scripts/ensure-docker.sh

## tools: host tools (bubblewrap, git) installed when missing
tools:
	scripts/ensure-tools.sh

## image: the sandbox image, built offline; skipped when its inputs are unchanged
image: docker cli
	AGENTBOX_CLAUDE_IMAGE=$(IMAGE) scripts/build-image.sh

## image-cursor: the Cursor sandbox image (needs the Cursor CLI's distribution,
## or CURSOR_AGENT_TARBALL pointing at its tarball); not part of setup
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

## test: the whole suite with real Docker, CLI and Kubernetes; fails if a
## container is left behind. Starts the local cluster when it is not up and
## stops it at the end (a cluster already up is left running).
test: go setup
	scripts/check-leftovers.sh snapshot .cache/containers-before
	AGENTBOX_CLUSTER=$(CLUSTER) AGENTBOX_CLUSTER_IMAGES='$(CLUSTER_IMAGES)' \
		scripts/cluster/with.sh $(GO) test -p $(TEST_P) -timeout 30m $(TEST_PKGS)
	scripts/check-leftovers.sh check .cache/containers-before

## bench: the benchmarks, with the same set-up as test
bench: go setup
	AGENTBOX_CLUSTER=$(CLUSTER) AGENTBOX_CLUSTER_IMAGES='$(CLUSTER_IMAGES)' \
		scripts/cluster/with.sh $(GO) test -p 1 -run '^$$' -bench . -benchmem $(TEST_PKGS)

## demo: the coding assistant end to end on the example app (offline, scripted
## model, real Claude Code CLI in a sandbox), then the Q&A assistant over HTTP
demo: build tools cli
	BIN=$(BIN) APP=$(APP) scripts/demo.sh

## check: go vet and gofmt
check: go
	$(GO) vet ./...
	cd scripts/cluster && $(GO) vet ./cni-loopback
	@out=$$(gofmt -l $$(git ls-files '*.go')); if [ -n "$$out" ]; then echo "gofmt needed:"; echo "$$out"; exit 1; fi

## clean: remove build outputs (keeps the cached CLI, rootfs and image)
clean:
	rm -rf bin .cache/image-build .cache/rootfs.tmp

## distclean: also remove .cache (CLI, root filesystem); images stay in Docker
distclean: clean
	[ ! -d .cache/cluster ] || scripts/cluster/down.sh
	rm -rf .cache
