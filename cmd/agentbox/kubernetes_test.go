package main

import (
	"bytes"
	"context"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/agentbox/agentbox/assistant"
	"github.com/agentbox/agentbox/internal/testenv"
	"github.com/agentbox/agentbox/sandbox"
	"github.com/agentbox/agentbox/sandbox/kubernetes"
)

func TestKubernetesOptions(t *testing.T) {
	t.Parallel()
	cfg := &assistant.AppConfig{DataRoot: "/srv/data", Sandbox: assistant.SandboxDefaults{Kubernetes: assistant.KubernetesConfig{
		Kubeconfig: "/app/kubeconfig", Context: "c", Namespace: "ns", ImagePullPolicy: "Never", AllowHostNetwork: true,
		WorkspaceClaim: "data", RuntimeClasses: map[string]string{"kata": "kata-qemu"}}}}
	o := kubernetesOptions(cfg, "")
	if o.Kubeconfig != "/app/kubeconfig" || o.Context != "c" || o.Namespace != "ns" || o.ImagePullPolicy != "Never" || !o.AllowHostNetwork ||
		o.RuntimeClasses["kata"] != "kata-qemu" || o.Storage != (kubernetes.Storage{Claim: "data", ClaimRoot: "/srv/data"}) {
		t.Errorf("options = %+v", o)
	}
	if o := kubernetesOptions(cfg, "/flag/kubeconfig"); o.Kubeconfig != "/flag/kubeconfig" {
		t.Errorf("--kubeconfig did not win: %q", o.Kubeconfig)
	}
	cfg.Sandbox.Kubernetes = assistant.KubernetesConfig{}
	if o := kubernetesOptions(cfg, ""); o.Storage != (kubernetes.Storage{}) {
		t.Errorf("no claim: storage = %+v, want hostPath", o.Storage)
	}
}

// TestOpenKubernetes: an app whose sandboxes run on kubernetes opens the
// runtime on the cluster --kubeconfig names, and a kubeconfig that does
// not exist is an error naming it.
func TestOpenKubernetes(t *testing.T) {
	kubeconfig := testenv.Cluster(t)
	app := exampleApp(t)
	cfg := `{"data_root": "./data", "sandbox": {"runtime": "kubernetes", "kubernetes": {"image_pull_policy": "Never"}}}`
	if err := os.WriteFile(filepath.Join(app, "app.jsonc"), []byte(cfg), 0o644); err != nil {
		t.Fatal(err)
	}
	var log bytes.Buffer
	logger := slog.New(slog.NewTextHandler(&log, nil))
	ctx := context.Background()
	env, err := openEnv(ctx, envOptions{AppDir: app, Logger: logger, Assistant: "coder", Kubeconfig: kubeconfig})
	if err != nil {
		t.Fatal(err)
	}
	if err := env.Close(ctx); err != nil {
		t.Error(err)
	}
	if !strings.Contains(log.String(), "msg=\"sandbox runtime ready\" runtime=kubernetes") {
		t.Errorf("log:\n%s", log.String())
	}
	_, err = openEnv(ctx, envOptions{AppDir: app, Logger: logger, Assistant: "coder", Kubeconfig: "/nonexistent/kubeconfig"})
	if err == nil || !strings.Contains(err.Error(), "sandbox runtime kubernetes") || !strings.Contains(err.Error(), "/nonexistent/kubeconfig") {
		t.Errorf("missing kubeconfig: err = %v", err)
	}
}

// TestClaimWorkspacesNotLooped: with a workspace claim, workspaces are
// plain folders on it (disk limits watched): a loop mount on the server's
// host would not reach pods on other nodes.
func TestClaimWorkspacesNotLooped(t *testing.T) {
	t.Parallel()
	var log bytes.Buffer
	ws, err := newWorkspaces(context.Background(), t.TempDir(), -1, -1, "the reason", 0, slog.New(slog.NewTextHandler(&log, nil)))
	if err != nil {
		t.Fatal(err)
	}
	if ws.DiskMode() != sandbox.DiskWatch || !strings.Contains(log.String(), "the reason") {
		t.Errorf("disk mode %s, log %q; want watch, with the reason", ws.DiskMode(), log.String())
	}
}

// TestOpenGateway: the gateway's address is bridge_address, else $POD_IP
// with the listen port when it listens on every interface; with a claim,
// the sessions' folder is on it.
func TestOpenGateway(t *testing.T) {
	logger := slog.New(slog.DiscardHandler)
	cfg := &assistant.AppConfig{DataRoot: "/srv/data", Sandbox: assistant.SandboxDefaults{Kubernetes: assistant.KubernetesConfig{
		BridgeListen: "127.0.0.1:0", BridgeAddress: "agentbox-0.test:41890"}}}
	gw, err := openGateway(cfg, logger)
	if err != nil {
		t.Fatal(err)
	}
	if gw.Address() != "agentbox-0.test:41890" || gw.Dir() != "" {
		t.Errorf("address %s, dir %q", gw.Address(), gw.Dir())
	}
	gw.Close()

	t.Setenv("POD_IP", "10.1.2.3")
	cfg.Sandbox.Kubernetes = assistant.KubernetesConfig{BridgeListen: "0.0.0.0:0", WorkspaceClaim: "data"}
	gw, err = openGateway(cfg, logger)
	if err != nil {
		t.Fatal(err)
	}
	if !strings.HasPrefix(gw.Address(), "10.1.2.3:") || strings.HasSuffix(gw.Address(), ":0") || gw.Dir() != "/srv/data/.agentbox-bridge/sessions" {
		t.Errorf("address %s, dir %q", gw.Address(), gw.Dir())
	}
	gw.Close()

	t.Setenv("POD_IP", "")
	if _, err := openGateway(cfg, logger); err == nil || !strings.Contains(err.Error(), "bridge_listen") {
		t.Errorf("wildcard without an address: %v", err)
	}
}
