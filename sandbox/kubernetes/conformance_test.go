package kubernetes_test

import (
	"context"
	"testing"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	corev1client "k8s.io/client-go/kubernetes/typed/core/v1"

	"github.com/agentbox/agentbox/sandbox"
	"github.com/agentbox/agentbox/sandbox/kubernetes"
	"github.com/agentbox/agentbox/sandbox/kubernetes/k8stest"
	"github.com/agentbox/agentbox/sandbox/sandboxtest"
)

// TestConformance runs the runtime conformance suite on the local cluster,
// as the server's service account of deploy/kubernetes. Its workspaces
// live in the cluster's shared folder, where the loop-mounted disk images
// of workspaces with a disk limit reach the node (hostPath storage).
func TestConformance(t *testing.T) {
	t.Setenv("TMPDIR", k8stest.SharedTempDir(t))
	sandboxtest.Run(t, func(t *testing.T) (sandbox.Runtime, sandboxtest.Features) {
		rt := k8stest.Runtime(t, kubernetes.Options{Instance: "conformance"})
		return rt, sandboxtest.Features{UID: 1000, GID: 1000, Home: kubernetes.DefaultHome, Engine: newEngine(t, rt)}
	})
}

// engine looks at sandboxes as pods, through the API server as an
// administrator.
type engine struct {
	core corev1client.CoreV1Interface
	ns   string
}

func newEngine(t *testing.T, rt *kubernetes.Runtime) engine {
	core, err := corev1client.NewForConfig(k8stest.Admin(t))
	if err != nil {
		t.Fatal(err)
	}
	return engine{core: core, ns: rt.Namespace()}
}

// Labels returns the exact label values, which the pod keeps in
// annotations of the same keys (label values are restricted; see
// kubernetes.LabelValue).
func (e engine) Labels(ctx context.Context, sb sandbox.Sandbox) (map[string]string, error) {
	pod, err := e.core.Pods(e.ns).Get(ctx, sb.ID(), metav1.GetOptions{})
	if err != nil {
		return nil, err
	}
	out := map[string]string{}
	for k := range pod.Labels {
		out[k] = pod.Annotations[k]
	}
	return out, nil
}

func (e engine) Exists(ctx context.Context, sb sandbox.Sandbox) (bool, error) {
	_, err := e.core.Pods(e.ns).Get(ctx, sb.ID(), metav1.GetOptions{})
	if apierrors.IsNotFound(err) {
		return false, nil
	}
	return err == nil, err
}

func (e engine) Destroy(ctx context.Context, sb sandbox.Sandbox) error {
	zero := int64(0)
	return e.core.Pods(e.ns).Delete(ctx, sb.ID(), metav1.DeleteOptions{GracePeriodSeconds: &zero})
}
