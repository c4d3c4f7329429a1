package assistant

import (
	"errors"
	"path/filepath"
	"strings"
	"testing"
)

func TestKubernetesConfig(t *testing.T) {
	t.Parallel()
	dir := appWith(t, `{"sandbox": {"runtime": "kubernetes", "kubernetes": {
  "kubeconfig": "kube/config", "context": "prod", "namespace": "sandboxes",
  "image_pull_policy": "Never", "allow_host_network": true,
  "workspace_claim": "agentbox-data", "claim_root": "/data", "runtime_class": "gvisor"}}}`)
	app, err := Load(dir)
	if err != nil {
		t.Fatal(err)
	}
	want := KubernetesConfig{Kubeconfig: filepath.Join(dir, "kube/config"), Context: "prod", Namespace: "sandboxes",
		ImagePullPolicy: "Never", AllowHostNetwork: true, WorkspaceClaim: "agentbox-data", ClaimRoot: "/data", RuntimeClass: "gvisor"}
	if got := app.Config.Sandbox.Kubernetes; got != want || app.Config.Sandbox.Runtime != "kubernetes" {
		t.Errorf("sandbox = %+v, want kubernetes with %+v", app.Config.Sandbox, want)
	}

	bad := appWith(t, `{"sandbox": {"kubernetes": {"namespace": "Sandboxes", "image_pull_policy": "Sometimes", "claim_root": "/data", "nodes": 3}}}`)
	_, err = Load(bad)
	var le *LoadError
	if !errors.As(err, &le) {
		t.Fatalf("err = %v, want a LoadError", err)
	}
	msgs := le.Error()
	for _, want := range []string{"nodes", "sandbox.kubernetes.namespace", "image_pull_policy", "claim_root is set without workspace_claim"} {
		if !strings.Contains(msgs, want) {
			t.Errorf("problems lack %q:\n%s", want, msgs)
		}
	}
}
