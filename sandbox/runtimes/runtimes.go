// Package runtimes is the explicit registry of sandbox runtimes: one map
// from name to constructor, so a configuration names a runtime and gets a
// clear error listing the known ones when the name is wrong.
package runtimes

import (
	"context"
	"fmt"
	"sort"
	"strings"

	"github.com/agentbox/agentbox/sandbox"
	"github.com/agentbox/agentbox/sandbox/docker"
	"github.com/agentbox/agentbox/sandbox/kubernetes"
	"github.com/agentbox/agentbox/sandbox/local"
)

// Options carries each runtime's options; New uses the one it builds.
type Options struct {
	Docker     docker.Options
	Kubernetes kubernetes.Options
	Local      local.Options
}

// constructor builds a runtime; it connects or checks, and starts nothing
// in the background.
type constructor func(ctx context.Context, opts Options) (sandbox.Runtime, error)

// registry is every runtime agentbox knows.
var registry = map[string]constructor{
	docker.Name: func(ctx context.Context, o Options) (sandbox.Runtime, error) { return docker.New(ctx, o.Docker) },
	kubernetes.Name: func(ctx context.Context, o Options) (sandbox.Runtime, error) {
		return kubernetes.New(ctx, o.Kubernetes)
	},
	local.Name: func(ctx context.Context, o Options) (sandbox.Runtime, error) { return local.New(o.Local) },
}

// Names lists the known runtime names, sorted.
func Names() []string {
	out := make([]string, 0, len(registry))
	for n := range registry {
		out = append(out, n)
	}
	sort.Strings(out)
	return out
}

// New builds the runtime called name. An unknown name is an error listing
// the known ones; an engine that is not there wraps
// sandbox.ErrEngineUnavailable.
func New(ctx context.Context, name string, opts Options) (sandbox.Runtime, error) {
	c, ok := registry[name]
	if !ok {
		return nil, fmt.Errorf("unknown sandbox runtime %q (known: %s)", name, strings.Join(Names(), ", "))
	}
	return c(ctx, opts)
}
