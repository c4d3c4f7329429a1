package assistant

import (
	"errors"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
)

func TestKubernetesConfig(t *testing.T) {
	t.Parallel()
	dir := appWith(t, `{"sandbox": {"runtime": "kubernetes", "kubernetes": {
  "kubeconfig": "kube/config", "context": "prod", "namespace": "sandboxes",
  "image_pull_policy": "Never", "allow_host_network": true,
  "workspace_claim": "agentbox-data", "claim_root": "/data", "runtime_classes": {"gvisor": "gvisor-systrap", "kata": ""},
  "bridge_listen": ":41890", "bridge_address": "10.0.0.7:41890"}}}`)
	app, err := Load(dir)
	if err != nil {
		t.Fatal(err)
	}
	want := KubernetesConfig{Kubeconfig: filepath.Join(dir, "kube/config"), Context: "prod", Namespace: "sandboxes",
		ImagePullPolicy: "Never", AllowHostNetwork: true, WorkspaceClaim: "agentbox-data", ClaimRoot: "/data", RuntimeClasses: map[string]string{"gvisor": "gvisor-systrap", "kata": ""},
		BridgeListen: ":41890", BridgeAddress: "10.0.0.7:41890"}
	if got := app.Config.Sandbox.Kubernetes; !reflect.DeepEqual(got, want) || app.Config.Sandbox.Runtime != "kubernetes" {
		t.Errorf("sandbox = %+v, want kubernetes with %+v", app.Config.Sandbox, want)
	}

	bad := appWith(t, `{"sandbox": {"kubernetes": {"namespace": "Sandboxes", "image_pull_policy": "Sometimes", "claim_root": "/data", "nodes": 3,
  "bridge_address": "no-port", "runtime_class": "gvisor", "runtime_classes": {"vm": "kata", "gvisor": "GVisor"}}}}`)
	_, err = Load(bad)
	var le *LoadError
	if !errors.As(err, &le) {
		t.Fatalf("err = %v, want a LoadError", err)
	}
	msgs := le.Error()
	for _, want := range []string{"nodes", "sandbox.kubernetes.namespace", "image_pull_policy", "claim_root is set without workspace_claim",
		`bridge_address "no-port": want host:port`, "bridge_address is set without bridge_listen",
		`unknown field "runtime_class" in sandbox.kubernetes (a sandbox's RuntimeClass follows its isolation now`,
		`runtime_classes: "vm" is not an isolation`, `runtime_classes.gvisor "GVisor" is not a RuntimeClass name`} {
		if !strings.Contains(msgs, want) {
			t.Errorf("problems lack %q:\n%s", want, msgs)
		}
	}
}

// TestKubernetesPoolDir: pool_dir is relative to the app folder.
func TestKubernetesPoolDir(t *testing.T) {
	t.Parallel()
	dir := appWith(t, `{"sandbox": {"runtime": "kubernetes", "kubernetes": {"pool_dir": "run/pool"}}}`)
	app, err := Load(dir)
	if err != nil {
		t.Fatal(err)
	}
	if got, want := app.Config.Sandbox.Kubernetes.PoolDir, filepath.Join(dir, "run/pool"); got != want {
		t.Errorf("pool_dir = %q, want %q", got, want)
	}
	_, err = Load(appWith(t, `{"sandbox": {"kubernetes": {"workspace_claim": "data", "pool_dir": "/pool"}}}`))
	if err == nil || !strings.Contains(err.Error(), "pool_dir is set with workspace_claim") {
		t.Errorf("pool_dir with workspace_claim: %v", err)
	}
}
