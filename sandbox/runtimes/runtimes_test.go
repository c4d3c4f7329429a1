package runtimes_test

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/agentbox/agentbox/internal/testenv"
	"github.com/agentbox/agentbox/sandbox"
	"github.com/agentbox/agentbox/sandbox/docker"
	"github.com/agentbox/agentbox/sandbox/kubernetes"
	"github.com/agentbox/agentbox/sandbox/kubernetes/k8stest"
	"github.com/agentbox/agentbox/sandbox/local"
	"github.com/agentbox/agentbox/sandbox/runtimes"
)

func TestNames(t *testing.T) {
	t.Parallel()
	got := runtimes.Names()
	if !slices.Equal(got, []string{"docker", "kubernetes", "local"}) {
		t.Fatalf("Names() = %v", got)
	}
}

func TestUnknown(t *testing.T) {
	t.Parallel()
	for _, name := range []string{"", "podman", "Docker"} {
		_, err := runtimes.New(context.Background(), name, runtimes.Options{})
		if err == nil || !strings.Contains(err.Error(), "known: docker, kubernetes, local") {
			t.Errorf("%q: err = %v", name, err)
		}
	}
}

func TestNewEach(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	t.Run("local", func(t *testing.T) {
		rt, err := runtimes.New(ctx, "local", runtimes.Options{Local: local.Options{Bwrap: testenv.Bwrap(t)}})
		if err != nil {
			t.Fatal(err)
		}
		defer rt.Close(ctx)
		if rt.Name() != "local" {
			t.Errorf("name = %q", rt.Name())
		}
	})
	t.Run("docker", func(t *testing.T) {
		testenv.Docker(t)
		rt, err := runtimes.New(ctx, "docker", runtimes.Options{})
		if err != nil {
			t.Fatal(err)
		}
		defer rt.Close(ctx)
		if rt.Name() != "docker" {
			t.Errorf("name = %q", rt.Name())
		}
	})
	t.Run("kubernetes", func(t *testing.T) {
		rt, err := runtimes.New(ctx, "kubernetes", runtimes.Options{Kubernetes: kubernetes.Options{RESTConfig: k8stest.ServiceAccount(t)}})
		if err != nil {
			t.Fatal(err)
		}
		defer rt.Close(ctx)
		if rt.Name() != "kubernetes" {
			t.Errorf("name = %q", rt.Name())
		}
	})
	t.Run("kubernetes unavailable", func(t *testing.T) {
		_, err := runtimes.New(ctx, "kubernetes", runtimes.Options{Kubernetes: kubernetes.Options{Kubeconfig: "/nonexistent/kubeconfig"}})
		if err == nil || !strings.Contains(err.Error(), "/nonexistent/kubeconfig") {
			t.Errorf("missing kubeconfig: err = %v", err)
		}
		// A cluster that does not answer.
		kc := filepath.Join(t.TempDir(), "kubeconfig")
		if err := os.WriteFile(kc, []byte(`apiVersion: v1
kind: Config
clusters: [{name: c, cluster: {server: "https://127.0.0.1:1"}}]
users: [{name: u, user: {token: x}}]
contexts: [{name: c, context: {cluster: c, user: u}}]
current-context: c
`), 0o600); err != nil {
			t.Fatal(err)
		}
		_, err = runtimes.New(ctx, "kubernetes", runtimes.Options{Kubernetes: kubernetes.Options{Kubeconfig: kc}})
		if !errors.Is(err, sandbox.ErrEngineUnavailable) {
			t.Errorf("cluster down: err = %v", err)
		}
	})
	t.Run("docker unavailable", func(t *testing.T) {
		_, err := runtimes.New(ctx, "docker", runtimes.Options{Docker: docker.Options{Host: "unix:///nonexistent.sock"}})
		if !errors.Is(err, sandbox.ErrEngineUnavailable) {
			t.Errorf("err = %v", err)
		}
	})
}
