package scaleout

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	corev1client "k8s.io/client-go/kubernetes/typed/core/v1"

	manifests "github.com/agentbox/agentbox/deploy/kubernetes"
	"github.com/agentbox/agentbox/internal/e2etest"
	"github.com/agentbox/agentbox/sandbox"
	"github.com/agentbox/agentbox/sandbox/kubernetes"
	"github.com/agentbox/agentbox/sandbox/kubernetes/k8stest"
)

// kubernetesRuntime runs the servers' sandboxes as pods of the local
// cluster, the servers acting as deploy/kubernetes' service account, each
// with its own bridge gateway (the pods mount no socket). The data root is
// in the cluster's shared folder (workspace mounts reach the node). The
// local cluster's pod network is loopback alone, so the pods share the
// node's network to reach the gateways on 127.0.0.1.
func kubernetesRuntime(t *testing.T) runtimeSetup {
	t.Helper()
	kubeconfig := k8stest.ServiceAccountKubeconfig(t)
	block := fmt.Sprintf(`{"runtime": "kubernetes", "network": "host", "images": {"claude": %q}, "kubernetes": {
		"kubeconfig": %q, "image_pull_policy": "Never", "allow_host_network": true, "bridge_listen": "127.0.0.1:0"}}`,
		k8stest.Image(), kubeconfig)
	core, err := corev1client.NewForConfig(k8stest.Admin(t))
	if err != nil {
		t.Fatal(err)
	}
	pods := func(t testing.TB, chatID string) []string {
		t.Helper()
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		list, err := core.Pods(manifests.SandboxNamespace).List(ctx, metav1.ListOptions{
			LabelSelector: sandbox.LabelChat + "=" + kubernetes.LabelValue(chatID)})
		if err != nil {
			t.Fatalf("list pods: %v", err)
		}
		var names []string
		for _, p := range list.Items {
			names = append(names, p.Name)
		}
		return names
	}
	return runtimeSetup{appDir: k8stest.SharedTempDir(t), sandbox: block, sandboxes: pods,
		args: []string{"--runtime", "kubernetes"}}
}

// TestTwoServersShareChatsOnKubernetes: the alternating turns of one chat
// on two servers sharing PostgreSQL and the local cluster, each turn's
// sandbox a pod whose bridge runs across the network to the server that
// made it.
func TestTwoServersShareChatsOnKubernetes(t *testing.T) {
	if testing.Short() {
		t.Skip("-short: integration test")
	}
	t.Parallel()
	c := newClusterOn(t, kubernetesRuntime(t), `"limits": {"chat_wait": "3m"}`)
	chatID := alternating(t, c)
	for _, s := range []*server{c.a, c.b} {
		if !strings.Contains(s.Logs.String(), "bridge gateway for sandbox pods") {
			t.Errorf("server %s started no bridge gateway", s.name)
		}
	}
	e2etest.WaitUntil(t, 30*time.Second, "the chat's pods to be gone", func() bool { return len(c.sandboxes(t, chatID)) == 0 })
}

// TestKilledServerOnKubernetes: a server killed mid-turn leaves its pod
// until its restart reaps it; the other server serves the chat meanwhile.
func TestKilledServerOnKubernetes(t *testing.T) {
	if testing.Short() {
		t.Skip("-short: integration test")
	}
	t.Parallel()
	killedServer(t, newClusterOn(t, kubernetesRuntime(t), `"limits": {"chat_wait": "3m"}`))
}
