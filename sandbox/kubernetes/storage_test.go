package kubernetes_test

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/agentbox/agentbox/internal/testenv"
	"github.com/agentbox/agentbox/sandbox"
	"github.com/agentbox/agentbox/sandbox/kubernetes"
	"github.com/agentbox/agentbox/sandbox/kubernetes/k8stest"
)

// claimNamespace makes a namespace (with labels) holding the claim
// "agentbox-data", bound to a hostPath PersistentVolume over the data root
// of the workspaces it returns: shared storage as a multi-node cluster
// would have it.
func claimNamespace(t *testing.T, prefix string, labels map[string]string) (string, *sandbox.Workspaces) {
	t.Helper()
	core := admin(t)
	ctx := context.Background()
	id := randID()
	ns := prefix + id
	if _, err := core.Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns, Labels: labels}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = core.Namespaces().Delete(context.Background(), ns, metav1.DeleteOptions{}) })
	wss := workspaces(t)
	root := filepath.Dir(wss.Root())
	size := resource.MustParse("1Gi")
	pv := &corev1.PersistentVolume{ObjectMeta: metav1.ObjectMeta{Name: "agentbox-data-" + id},
		Spec: corev1.PersistentVolumeSpec{
			Capacity:                      corev1.ResourceList{corev1.ResourceStorage: size},
			AccessModes:                   []corev1.PersistentVolumeAccessMode{corev1.ReadWriteMany},
			PersistentVolumeReclaimPolicy: corev1.PersistentVolumeReclaimRetain,
			StorageClassName:              "",
			PersistentVolumeSource:        corev1.PersistentVolumeSource{HostPath: &corev1.HostPathVolumeSource{Path: root}},
			ClaimRef:                      &corev1.ObjectReference{Namespace: ns, Name: "agentbox-data"},
		}}
	empty := ""
	pvc := &corev1.PersistentVolumeClaim{ObjectMeta: metav1.ObjectMeta{Name: "agentbox-data"},
		Spec: corev1.PersistentVolumeClaimSpec{
			AccessModes:      []corev1.PersistentVolumeAccessMode{corev1.ReadWriteMany},
			StorageClassName: &empty,
			VolumeName:       pv.Name,
			Resources:        corev1.VolumeResourceRequirements{Requests: corev1.ResourceList{corev1.ResourceStorage: size}},
		}}
	if _, err := core.PersistentVolumeClaims(ns).Create(ctx, pvc, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	// The claim first: the volume controller then binds the two at once.
	if _, err := core.PersistentVolumes().Create(ctx, pv, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = core.PersistentVolumes().Delete(context.Background(), pv.Name, metav1.DeleteOptions{}) })
	return ns, wss
}

// TestClaimStorage: with claim storage the workspace reaches the pod as a
// subPath of a PersistentVolumeClaim, as it would from shared storage on
// a multi-node cluster (here a hostPath PersistentVolume over the test's
// data root).
func TestClaimStorage(t *testing.T) {
	t.Parallel()
	core := admin(t)
	ctx := context.Background()
	ns, wss := claimNamespace(t, "agentbox-claim-", nil)
	root := filepath.Dir(wss.Root())
	rt := k8stest.Runtime(t, kubernetes.Options{Instance: "claim", Namespace: ns, RESTConfig: k8stest.Admin(t),
		Storage: kubernetes.Storage{Claim: "agentbox-data", ClaimRoot: root}})
	ws, release, err := wss.Acquire(ctx, "u1", "c1")
	if err != nil {
		t.Fatal(err)
	}
	defer release()
	if err := ws.WriteFile(ctx, "from-host.txt", []byte("host"), 0o644); err != nil {
		t.Fatal(err)
	}
	sb, err := rt.Create(ctx, sandbox.Spec{UserID: "u1", ChatID: "c1", Workspace: ws})
	if sb != nil {
		defer sb.Remove(ctx)
	}
	if err != nil {
		t.Fatal(err)
	}
	res, err := sb.Exec(ctx, sandbox.ExecRequest{Argv: []string{"cat from-host.txt; echo pod > from-pod.txt; ls /workspace"}, Shell: true})
	if err != nil || res.Stdout != "host"+"from-host.txt\nfrom-pod.txt\n" {
		t.Fatalf("in the pod: %+v, %v", res, err)
	}
	if b, err := ws.ReadFile(ctx, "from-pod.txt", 0); err != nil || string(b) != "pod\n" {
		t.Errorf("on the host: %q, %v", b, err)
	}
	pod, err := core.Pods(ns).Get(ctx, sb.ID(), metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	for _, v := range pod.Spec.Volumes {
		if v.HostPath != nil {
			t.Errorf("claim storage, yet a hostPath volume: %+v", v)
		}
	}
}

// TestVolumeMissing: a workspace the node does not have (here: deleted
// after it was acquired) fails Create within seconds with the kubelet's
// reason, as does a workspace claim that does not exist.
func TestVolumeMissing(t *testing.T) {
	t.Parallel()
	rt := k8stest.Runtime(t, kubernetes.Options{Instance: "volume-missing"})
	start := time.Now()
	_, err := newSandbox(t, rt, func(s *sandbox.Spec) {
		if err := os.RemoveAll(s.Workspace.Dir()); err != nil {
			t.Fatal(err)
		}
	})
	if err == nil || !strings.Contains(err.Error(), "hostPath type check failed") || !strings.Contains(err.Error(), "workspace_claim") {
		t.Errorf("workspace missing on the node: err = %v", err)
	}
	if d := time.Since(start); d > 20*time.Second {
		t.Errorf("the error took %s", d)
	}
	noClaim := k8stest.Runtime(t, kubernetes.Options{Instance: "volume-missing",
		Storage: kubernetes.Storage{Claim: "no-such-claim", ClaimRoot: "/"}})
	if _, err := newSandbox(t, noClaim, nil); err == nil || !strings.Contains(err.Error(), `persistentvolumeclaim "no-such-claim" not found`) {
		t.Errorf("claim missing: err = %v", err)
	}
	if left := append(k8stest.Pods(t, rt), k8stest.Pods(t, noClaim)...); len(left) != 0 {
		t.Errorf("pods left: %v", left)
	}
}

// TestWorkspaceMountUnseen: a workspace with a disk limit is a
// loop-mounted image; outside the local cluster's shared folder the node
// does not receive that mount, and Create says so rather than give the
// pod the empty folder under it.
func TestWorkspaceMountUnseen(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	root := filepath.Join(t.TempDir(), "data")
	if mode, why := sandbox.DetectDiskMode(ctx, root); mode != sandbox.DiskLoop {
		testenv.Missing(t, "loop-mounted workspace disks ("+why+")")
	}
	rt := k8stest.Runtime(t, kubernetes.Options{Instance: "mount-unseen"})
	wss, err := sandbox.NewWorkspacesWith(root, sandbox.WorkspacesOptions{UID: 1000, GID: 1000, Disk: sandbox.DiskLoop})
	if err != nil {
		t.Fatal(err)
	}
	ws, release, err := wss.AcquireWith(ctx, "u1", "c1", sandbox.AcquireOptions{MaxDisk: 48 << 20})
	if err != nil {
		t.Fatal(err)
	}
	defer release()
	sb, err := rt.Create(ctx, sandbox.Spec{UserID: "u1", ChatID: "c1", Workspace: ws})
	if sb != nil {
		_ = sb.Remove(ctx)
	}
	if err == nil || !strings.Contains(err.Error(), "does not see the workspace's own file system") {
		t.Fatalf("err = %v, want one saying the pod does not see the mount", err)
	}
	if left := k8stest.Pods(t, rt); len(left) != 0 {
		t.Errorf("pods left: %v", left)
	}
}

// TestClaimDiskLimit: workspaces on a shared claim cannot be loop-mounted
// images (no pod on another node would see the mount), so their disk
// limit is measured, and still kept: an agent that writes on and on past
// it has its pod stopped within seconds of the measure that saw it, and
// the files it wrote are deleted, largest first, until the workspace is
// back within its limit; what the workspace held before the sandbox
// stays.
func TestClaimDiskLimit(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	ns, plain := claimNamespace(t, "agentbox-claimdisk-", nil)
	root := filepath.Dir(plain.Root())
	wss, err := sandbox.NewWorkspacesWith(root, sandbox.WorkspacesOptions{UID: 1000, GID: 1000, Disk: sandbox.DiskWatch})
	if err != nil {
		t.Fatal(err)
	}
	const limit = 48 << 20
	before, release, err := wss.AcquireWith(ctx, "u1", "c1", sandbox.AcquireOptions{MaxDisk: limit})
	if err != nil {
		t.Fatal(err)
	}
	err = before.WriteFile(ctx, "before.bin", make([]byte, 8<<20), 0o644)
	release()
	if err != nil {
		t.Fatal(err)
	}
	ws, release, err := wss.AcquireWith(ctx, "u1", "c1", sandbox.AcquireOptions{MaxDisk: limit})
	if err != nil {
		t.Fatal(err)
	}
	defer release()
	rt := k8stest.Runtime(t, kubernetes.Options{Instance: "claim-disk", Namespace: ns, RESTConfig: k8stest.Admin(t),
		Storage: kubernetes.Storage{Claim: "agentbox-data", ClaimRoot: root}})
	sb, err := rt.Create(ctx, sandbox.Spec{UserID: "u1", ChatID: "c1", Workspace: ws})
	if sb != nil {
		defer sb.Remove(ctx)
	}
	if err != nil {
		t.Fatal(err)
	}
	full := make(chan sandbox.DiskFull, 1)
	stop := ws.WatchDisk(ctx, sb.Remove, func(f sandbox.DiskFull) { full <- f })
	defer stop()
	// 16 MiB every 0.2 s, without end: far past the limit between two
	// measures, and on until stopped.
	writer, err := sb.Start(ctx, sandbox.ExecRequest{Shell: true,
		Argv: []string{`i=0; while :; do dd if=/dev/zero of=/workspace/w$i bs=1M count=16 2>/dev/null; i=$((i+1)); sleep 0.2; done`}})
	if err != nil {
		t.Fatal(err)
	}
	var f sandbox.DiskFull
	select {
	case f = <-full:
	case <-time.After(2 * time.Minute):
		t.Fatal("the workspace grew past its limit unreported")
	}
	if f.Used <= limit || f.After > limit || len(f.Removed) == 0 || f.HaltErr != nil {
		t.Errorf("reported %+v: %s", f, f.Message())
	}
	for _, name := range f.Removed {
		if !strings.HasPrefix(name, "w") {
			t.Errorf("removed %s, which the sandbox did not write", name)
		}
	}
	wctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	if code, err := writer.Wait(wctx); wctx.Err() != nil {
		t.Errorf("the writer was not stopped (%d, %v)", code, err)
	}
	if left := k8stest.Pods(t, rt); len(left) != 0 {
		t.Errorf("pods left after the limit was kept: %v", left)
	}
	if st, err := ws.Stat(ctx, "before.bin"); err != nil || st.Size != 8<<20 {
		t.Errorf("the workspace's earlier file: %+v, %v", st, err)
	}
	var used int64
	for _, e := range mustList(t, ws) {
		used += e.Size
	}
	if used > limit {
		t.Errorf("the workspace's files hold %d bytes after the limit was kept, more than its limit %d", used, limit)
	}
	t.Logf("measured %d MiB over a %d MiB limit; %d files deleted, %d MiB left: %s", f.Used>>20, limit>>20, len(f.Removed), f.After>>20, f.Message())
}

func mustList(t *testing.T, ws *sandbox.Workspace) []sandbox.FileInfo {
	t.Helper()
	list, err := ws.ListDir(context.Background(), ".")
	if err != nil {
		t.Fatal(err)
	}
	return list
}
