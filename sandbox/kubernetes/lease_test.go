package kubernetes_test

import (
	"context"
	"slices"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	coordinationclient "k8s.io/client-go/kubernetes/typed/coordination/v1"

	"github.com/agentbox/agentbox/sandbox/kubernetes"
	"github.com/agentbox/agentbox/sandbox/kubernetes/k8stest"
)

// TestLeaseReaping: a runtime that made a pod keeps a lease; while it is
// renewed, another runtime's reaper leaves the pod alone (its owner's
// liveness cannot be told from its process: it could be on another
// host); once renewals stop, as when a server dies, the other reaps the
// pod after three lease durations, not the grace period. Close deletes
// the lease.
func TestLeaseReaping(t *testing.T) {
	t.Parallel()
	core := admin(t)
	ctx := context.Background()
	ns := "agentbox-lease-" + randID()
	if _, err := core.Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = core.Namespaces().Delete(context.Background(), ns, metav1.DeleteOptions{}) })
	leases, err := coordinationclient.NewForConfig(k8stest.Admin(t))
	if err != nil {
		t.Fatal(err)
	}
	opts := func(inst string) kubernetes.Options {
		return kubernetes.Options{Instance: inst, Namespace: ns, RESTConfig: k8stest.Admin(t), LeaseDuration: time.Second}
	}
	a, b := k8stest.Runtime(t, opts("lease-a")), k8stest.Runtime(t, opts("lease-b"))
	sb, err := newSandbox(t, a, nil)
	if err != nil {
		t.Fatal(err)
	}
	name := kubernetes.LeaseName(a.RunID())
	l, err := leases.Leases(ns).Get(ctx, name, metav1.GetOptions{})
	for i := 0; err != nil && i < 50; i++ {
		time.Sleep(100 * time.Millisecond)
		l, err = leases.Leases(ns).Get(ctx, name, metav1.GetOptions{})
	}
	if err != nil || l.Spec.HolderIdentity == nil || *l.Spec.HolderIdentity != a.RunID() {
		t.Fatalf("lease of the runtime that made a pod: %+v, %v", l, err)
	}
	time.Sleep(4 * time.Second) // renewed meanwhile
	if got, err := b.Reap(ctx, kubernetes.ReapOptions{DryRun: true}); err != nil || len(got) != 0 {
		t.Fatalf("reap while the owner renews its lease = %v, %v; want nothing", got, err)
	}
	a.StopHeartbeat()
	time.Sleep(4 * time.Second)
	got, err := b.Reap(ctx, kubernetes.ReapOptions{})
	if err != nil || !slices.Equal(got, []string{sb.ID()}) {
		t.Fatalf("reap once the owner's lease expired = %v, %v; want %s", got, err, sb.ID())
	}
	if err := a.Close(ctx); err != nil {
		t.Fatal(err)
	}
	if _, err := leases.Leases(ns).Get(ctx, name, metav1.GetOptions{}); !apierrors.IsNotFound(err) {
		t.Errorf("the lease after Close: %v, want NotFound", err)
	}
}
