package docker_test

import (
	"context"
	"testing"

	cerrdefs "github.com/containerd/errdefs"
	"github.com/docker/docker/api/types/container"

	"github.com/agentbox/agentbox/internal/testenv"
	"github.com/agentbox/agentbox/sandbox"
	"github.com/agentbox/agentbox/sandbox/docker"
	"github.com/agentbox/agentbox/sandbox/sandboxtest"
)

// TestConformance runs the runtime conformance suite on the Docker
// engine, with runc.
func TestConformance(t *testing.T) {
	sandboxtest.Run(t, func(t *testing.T) (sandbox.Runtime, sandboxtest.Features) {
		rt, _ := newRuntime(t)
		return rt, sandboxtest.Features{UID: 1000, GID: 1000, Home: docker.DefaultHome, Engine: engine{rt}}
	})
}

// TestConformanceGVisor runs the suite again with every sandbox on
// gVisor's runsc: the same contracts hold in its user-space kernel.
func TestConformanceGVisor(t *testing.T) {
	testenv.GVisor(t)
	sandboxtest.Run(t, func(t *testing.T) (sandbox.Runtime, sandboxtest.Features) {
		rt, _ := newRuntime(t)
		return rt, sandboxtest.Features{UID: 1000, GID: 1000, Home: docker.DefaultHome, Engine: engine{rt}, Isolation: sandbox.IsolationGVisor,
			InnerSpecialFiles: "gVisor keeps a FIFO made on a host mount in its own kernel"}
	})
}

// engine looks at sandboxes as containers, through the engine's API.
type engine struct{ rt *docker.Runtime }

func (e engine) Labels(ctx context.Context, sb sandbox.Sandbox) (map[string]string, error) {
	ins, err := e.rt.Client().ContainerInspect(ctx, sb.ID())
	if err != nil {
		return nil, err
	}
	return ins.Config.Labels, nil
}

func (e engine) Exists(ctx context.Context, sb sandbox.Sandbox) (bool, error) {
	_, err := e.rt.Client().ContainerInspect(ctx, sb.ID())
	if cerrdefs.IsNotFound(err) {
		return false, nil
	}
	return err == nil, err
}

func (e engine) Destroy(ctx context.Context, sb sandbox.Sandbox) error {
	return e.rt.Client().ContainerRemove(ctx, sb.ID(), container.RemoveOptions{Force: true})
}
