package kubernetes_test

import (
	"context"
	"os"
	"slices"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/agentbox/agentbox/sandbox"
	"github.com/agentbox/agentbox/sandbox/kubernetes"
	"github.com/agentbox/agentbox/sandbox/kubernetes/k8stest"
)

// TestReaper: in a namespace of its own, the reaper deletes the pods of an
// owner that is gone and, past the grace period, those of other
// instances, never the sandboxes its runtime tracks.
func TestReaper(t *testing.T) {
	t.Parallel()
	core := admin(t)
	ctx := context.Background()
	ns := "agentbox-reap-" + randID()
	if _, err := core.Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = core.Namespaces().Delete(context.Background(), ns, metav1.DeleteOptions{}) })
	opts := func(inst string) kubernetes.Options {
		return kubernetes.Options{Instance: inst, Namespace: ns, RESTConfig: k8stest.Admin(t)}
	}
	a, b := k8stest.Runtime(t, opts("reap-a")), k8stest.Runtime(t, opts("reap-b"))
	own, err := newSandbox(t, a, nil)
	if err != nil {
		t.Fatal(err)
	}
	other, err := newSandbox(t, b, nil)
	if err != nil {
		t.Fatal(err)
	}
	// A pod of a server process on this host that is gone.
	host, _ := os.Hostname()
	deadRun := host + "/1/not-its-start-time/dead"
	meta := map[string]string{sandbox.LabelProduct: "agentbox", sandbox.LabelInstance: "crashed", sandbox.LabelRun: deadRun,
		sandbox.LabelCreated: time.Now().UTC().Format(time.RFC3339)}
	labels := map[string]string{}
	for k, v := range meta {
		labels[k] = kubernetes.LabelValue(v)
	}
	no := false
	dead, err := core.Pods(ns).Create(ctx, &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: "orphan-" + randID(), Labels: labels, Annotations: meta},
		Spec: corev1.PodSpec{AutomountServiceAccountToken: &no, Containers: []corev1.Container{{
			Name: "sandbox", Image: k8stest.Image(), ImagePullPolicy: corev1.PullNever, Command: []string{"sleep", "infinity"}}}},
	}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = core.Pods(ns).Delete(context.Background(), dead.Name, metav1.DeleteOptions{}) })

	got, err := a.Reap(ctx, kubernetes.ReapOptions{DryRun: true})
	if err != nil || !slices.Equal(got, []string{dead.Name}) {
		t.Fatalf("dry run = %v, %v; want only the pod of the dead owner, %s", got, err, dead.Name)
	}
	if _, err := core.Pods(ns).Get(ctx, dead.Name, metav1.GetOptions{}); err != nil {
		t.Fatalf("the dry run deleted: %v", err)
	}
	if got, err = a.Reap(ctx, kubernetes.ReapOptions{}); err != nil || !slices.Equal(got, []string{dead.Name}) {
		t.Fatalf("reap = %v, %v; want %s", got, err, dead.Name)
	}
	if p, err := core.Pods(ns).Get(ctx, dead.Name, metav1.GetOptions{}); !apierrors.IsNotFound(err) && (err != nil || p.DeletionTimestamp == nil) {
		t.Errorf("the dead owner's pod is still there: %v", err)
	}
	// Past the grace period, another live instance's pod goes too; the
	// reaping runtime's own tracked sandbox stays.
	time.Sleep(1100 * time.Millisecond)
	if got, err = a.Reap(ctx, kubernetes.ReapOptions{Grace: time.Second}); err != nil || !slices.Equal(got, []string{other.ID()}) {
		t.Fatalf("reap with a grace of 1s = %v, %v; want %s", got, err, other.ID())
	}
	if res, err := own.Exec(ctx, sandbox.ExecRequest{Argv: []string{"true"}}); err != nil || res.ExitCode != 0 {
		t.Errorf("the tracked sandbox after reaping: %+v, %v", res, err)
	}
	// Once removed and untracked, nothing is left to reap.
	if err := own.Remove(ctx); err != nil {
		t.Fatal(err)
	}
	if got, err = a.Reap(ctx, kubernetes.ReapOptions{}); err != nil || len(got) != 0 {
		t.Errorf("reap after everything was removed = %v, %v", got, err)
	}
}
