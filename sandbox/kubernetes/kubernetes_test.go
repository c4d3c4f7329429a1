package kubernetes_test

import (
	"cmp"
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	corev1client "k8s.io/client-go/kubernetes/typed/core/v1"

	"github.com/agentbox/agentbox/sandbox"
	"github.com/agentbox/agentbox/sandbox/kubernetes"
	"github.com/agentbox/agentbox/sandbox/kubernetes/k8stest"
)

func randID() string {
	b := make([]byte, 4)
	_, _ = rand.Read(b)
	return hex.EncodeToString(b)
}

// workspaces makes a workspace root the sandbox user can reach (a test
// folder is 0700).
func workspaces(t testing.TB) *sandbox.Workspaces {
	t.Helper()
	d := t.TempDir()
	for p := d; p != "/" && p != os.TempDir(); p = filepath.Dir(p) {
		_ = os.Chmod(p, 0o755)
	}
	wss, err := sandbox.NewWorkspaces(d, 1000, 1000)
	if err != nil {
		t.Fatal(err)
	}
	return wss
}

// newSandbox creates a sandbox with a fresh workspace; adjust may change
// the spec first.
func newSandbox(t testing.TB, rt *kubernetes.Runtime, adjust func(*sandbox.Spec)) (*kubernetes.Sandbox, error) {
	t.Helper()
	chat := "c-" + randID()
	ws, release, err := workspaces(t).Acquire(context.Background(), "u1", chat)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(release)
	spec := sandbox.Spec{UserID: "u1", ChatID: chat, Workspace: ws}
	if adjust != nil {
		adjust(&spec)
	}
	sb, err := rt.Create(context.Background(), spec)
	if sb != nil {
		t.Cleanup(func() { _ = sb.Remove(context.Background()) })
		return sb.(*kubernetes.Sandbox), err
	}
	return nil, err
}

func admin(t testing.TB) corev1client.CoreV1Interface {
	t.Helper()
	core, err := corev1client.NewForConfig(k8stest.Admin(t))
	if err != nil {
		t.Fatal(err)
	}
	return core
}

// ownPods lists the pods of a runtime, by its run label.
func ownPods(t testing.TB, core corev1client.CoreV1Interface, rt *kubernetes.Runtime) []corev1.Pod {
	t.Helper()
	list, err := core.Pods(rt.Namespace()).List(context.Background(), metav1.ListOptions{
		LabelSelector: sandbox.LabelRun + "=" + kubernetes.LabelValue(rt.RunID())})
	if err != nil {
		t.Fatal(err)
	}
	return list.Items
}

// TestHardening looks at a sandbox pod as the API server stores it and
// from inside: what the Docker runtime's HostConfig does, expressed as the
// pod's security context and limits.
func TestHardening(t *testing.T) {
	t.Parallel()
	rt := k8stest.Runtime(t, kubernetes.Options{Instance: "hardening"})
	const secret = "sk-secret-in-the-spec-env"
	extra := t.TempDir()
	_ = os.Chmod(extra, 0o755)
	sb, err := newSandbox(t, rt, func(s *sandbox.Spec) {
		s.MemoryBytes = 256 << 20
		s.CPUs = 1.5
		s.Env = map[string]string{"API_KEY": secret}
		s.Mounts = []sandbox.Mount{{Source: extra, Target: "/opt/extra"}}
		s.Labels = map[string]string{"dev.agentbox.assistant": "a1", sandbox.LabelInstance: "forged"}
	})
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	pod, err := admin(t).Pods(rt.Namespace()).Get(ctx, sb.ID(), metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	ps, c := pod.Spec, pod.Spec.Containers[0]
	psc, csc := ps.SecurityContext, c.SecurityContext
	raw, _ := json.Marshal(pod)
	lim := c.Resources.Limits
	checks := []struct {
		name string
		ok   bool
		got  any
	}{
		{"one container", len(ps.Containers) == 1 && len(ps.InitContainers) == 0, len(ps.Containers)},
		{"run as 1000:1000", *psc.RunAsUser == 1000 && *psc.RunAsGroup == 1000, psc},
		{"run as non-root", *psc.RunAsNonRoot && *csc.RunAsNonRoot, psc.RunAsNonRoot},
		{"seccomp RuntimeDefault", psc.SeccompProfile.Type == corev1.SeccompProfileTypeRuntimeDefault, psc.SeccompProfile},
		{"capabilities dropped", slices.Equal(csc.Capabilities.Drop, []corev1.Capability{"ALL"}) && len(csc.Capabilities.Add) == 0, csc.Capabilities},
		{"no privilege escalation", !*csc.AllowPrivilegeEscalation, csc.AllowPrivilegeEscalation},
		{"not privileged", !*csc.Privileged, csc.Privileged},
		{"read-only root", *csc.ReadOnlyRootFilesystem, csc.ReadOnlyRootFilesystem},
		{"memory limit", lim.Memory().Value() == 256<<20, lim.Memory()},
		{"cpu limit", lim.Cpu().MilliValue() == 1500, lim.Cpu()},
		{"ephemeral-storage limit", lim.StorageEphemeral().Value() == kubernetes.DefaultEphemeralBytes, lim.StorageEphemeral()},
		{"requests at most the limits", c.Resources.Requests.Memory().Cmp(*lim.Memory()) <= 0 && c.Resources.Requests.Cpu().Cmp(*lim.Cpu()) <= 0, c.Resources.Requests},
		{"no service-account token", !*ps.AutomountServiceAccountToken, ps.AutomountServiceAccountToken},
		{"no service links", !*ps.EnableServiceLinks, ps.EnableServiceLinks},
		{"shared process namespace (pause reaps)", *ps.ShareProcessNamespace, ps.ShareProcessNamespace},
		{"no host network, pid or ipc", !ps.HostNetwork && !ps.HostPID && !ps.HostIPC, ps.HostNetwork},
		{"never restarted", ps.RestartPolicy == corev1.RestartPolicyNever, ps.RestartPolicy},
		{"spec env not in the pod", !strings.Contains(string(raw), secret), "the pod object holds the secret"},
		{"label instance (not forgeable)", pod.Labels[sandbox.LabelInstance] == "hardening", pod.Labels},
		{"label network", pod.Labels[kubernetes.LabelNetwork] == "none", pod.Labels},
		{"label run", pod.Annotations[sandbox.LabelRun] == rt.RunID(), pod.Annotations},
		{"label isolation", pod.Labels[sandbox.LabelIsolation] == "runc", pod.Labels},
		{"no runtime class (the node's default, runc)", ps.RuntimeClassName == nil, ps.RuntimeClassName},
	}
	for _, v := range ps.Volumes {
		switch {
		case v.EmptyDir != nil:
			checks = append(checks, struct {
				name string
				ok   bool
				got  any
			}{"memory-backed " + v.Name, v.EmptyDir.Medium == corev1.StorageMediumMemory && v.EmptyDir.SizeLimit != nil, v.EmptyDir})
		case v.HostPath != nil:
			ro := false
			for _, m := range c.VolumeMounts {
				if m.Name == v.Name {
					ro = m.ReadOnly || m.MountPath == sandbox.Workdir
				}
			}
			checks = append(checks, struct {
				name string
				ok   bool
				got  any
			}{"hostPath " + v.HostPath.Path + " is the workspace or read-only", ro && v.HostPath.Type != nil, v.HostPath})
		}
	}
	for _, c := range checks {
		if !c.ok {
			t.Errorf("%s: got %+v", c.name, c.got)
		}
	}

	res, err := sb.Exec(ctx, sandbox.ExecRequest{Argv: []string{`grep -E '^(CapEff|CapBnd|NoNewPrivs|Seccomp):' /proc/self/status | tr -s '\t' ' '
grep -E ' /(tmp|home/agent) ' /proc/mounts | cut -d' ' -f2,3 | sort
test -e /var/run/secrets/kubernetes.io || echo no-token
env | grep -c '^KUBERNETES_' ; echo "key=$API_KEY"`}, Shell: true})
	if err != nil {
		t.Fatal(err)
	}
	want := "CapEff: 0000000000000000\nCapBnd: 0000000000000000\nNoNewPrivs: 1\nSeccomp: 2\n/home/agent tmpfs\n/tmp tmpfs\nno-token\n0\nkey=" + secret + "\n"
	if res.Stdout != want || res.ExitCode != 0 {
		t.Errorf("inside the sandbox:\n%s(stderr %q, exit %d)\nwant:\n%s", res.Stdout, res.Stderr, res.ExitCode, want)
	}
	// The pids limit is the kubelet's podPidsLimit, on the pod's cgroup
	// (the container's own says "max"); the local cluster's node is this
	// host, whose cgroup file system shows it.
	if got := k8stest.PodCgroup(t, sb, "pids", "pids.max"); got != "512" {
		t.Errorf("the pod cgroup's pids.max = %q, want the local cluster's podPidsLimit 512", got)
	}
}

// TestRuntimeClass: a sandbox's isolation picks its pod's RuntimeClass
// (the default names, or the runtime's own map), which the API server
// admits with the class's overhead (a server-side dry run: the local
// cluster's node has no runsc handler, see
// docs/isolation.md); an isolation the runtime has no class for, or a class the
// cluster lacks, fails Create with ErrIsolation and leaves no pod.
func TestRuntimeClass(t *testing.T) {
	t.Parallel()
	core := admin(t)
	rt := k8stest.Runtime(t, kubernetes.Options{Instance: "runtime-class", RuntimeClasses: map[string]string{sandbox.IsolationKata: ""}})
	ws, release, err := workspaces(t).Acquire(context.Background(), "u1", "c-"+randID())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(release)
	for _, c := range []struct {
		isolation, class string
	}{{"", ""}, {sandbox.IsolationRunc, ""}, {sandbox.IsolationGVisor, "gvisor"}} {
		pod, err := rt.PodFor(sandbox.Spec{UserID: "u1", ChatID: "c1", Workspace: ws, Isolation: c.isolation})
		if err != nil {
			t.Fatal(err)
		}
		got, err := core.Pods(rt.Namespace()).Create(context.Background(), pod, metav1.CreateOptions{DryRun: []string{metav1.DryRunAll}})
		if err != nil {
			t.Fatalf("isolation %q: dry run: %v", c.isolation, err)
		}
		class := ""
		if got.Spec.RuntimeClassName != nil {
			class = *got.Spec.RuntimeClassName
		}
		want := cmp.Or(c.isolation, sandbox.IsolationRunc)
		if class != c.class || got.Labels[sandbox.LabelIsolation] != want {
			t.Errorf("isolation %q: runtime class %q, label %q; want %q, %q", c.isolation, class, got.Labels[sandbox.LabelIsolation], c.class, want)
		}
		// The RuntimeClass's overhead reaches the pod: the scheduler counts it.
		if hasOverhead := !got.Spec.Overhead.Memory().IsZero(); hasOverhead != (c.class != "") {
			t.Errorf("isolation %q: pod overhead %v", c.isolation, got.Spec.Overhead)
		}
	}
	if _, err := newSandbox(t, rt, func(s *sandbox.Spec) { s.Isolation = sandbox.IsolationKata }); !errors.Is(err, sandbox.ErrIsolation) ||
		!strings.Contains(err.Error(), `isolation "kata" is not available on the kubernetes runtime (it offers runc, gvisor)`) {
		t.Errorf("kata without a class: %v", err)
	}
	missing := k8stest.Runtime(t, kubernetes.Options{Instance: "runtime-class", RuntimeClasses: map[string]string{sandbox.IsolationGVisor: "no-such-class"}})
	if _, err := newSandbox(t, missing, func(s *sandbox.Spec) { s.Isolation = sandbox.IsolationGVisor }); !errors.Is(err, sandbox.ErrIsolation) ||
		!strings.Contains(err.Error(), "no such RuntimeClass") {
		t.Errorf("a class the cluster lacks: %v", err)
	}
	if pods := k8stest.Pods(t, missing); len(pods) != 0 {
		t.Errorf("pods left: %v", pods)
	}
}

// TestImageMissing: an image the node lacks fails Create at once, naming
// the image and the reason, and leaves no pod behind.
func TestImageMissing(t *testing.T) {
	t.Parallel()
	rt := k8stest.Runtime(t, kubernetes.Options{Instance: "image-missing"})
	start := time.Now()
	_, err := newSandbox(t, rt, func(s *sandbox.Spec) { s.Image = "agentbox/no-such-image:none" })
	if err == nil || !strings.Contains(err.Error(), "ErrImageNeverPull") || !strings.Contains(err.Error(), "agentbox/no-such-image:none") {
		t.Fatalf("err = %v, want one naming ErrImageNeverPull and the image", err)
	}
	if d := time.Since(start); d > 15*time.Second {
		t.Errorf("the error took %s", d)
	}
	if pods := ownPods(t, admin(t), rt); len(pods) != 0 {
		t.Errorf("pods left behind: %d", len(pods))
	}
}

// TestUnschedulable: a pod no node can take fails after the start
// timeout with the scheduler's reason, and is deleted.
func TestUnschedulable(t *testing.T) {
	t.Parallel()
	rt := k8stest.Runtime(t, kubernetes.Options{Instance: "unschedulable", StartTimeout: 3 * time.Second, RequestMemoryBytes: 1 << 50})
	_, err := newSandbox(t, rt, func(s *sandbox.Spec) { s.MemoryBytes = 1 << 50 })
	if err == nil || !strings.Contains(err.Error(), "Unschedulable") || !strings.Contains(err.Error(), "memory") {
		t.Fatalf("err = %v, want one with the scheduler's reason", err)
	}
	if pods := ownPods(t, admin(t), rt); len(pods) != 0 {
		t.Errorf("pods left behind: %d", len(pods))
	}
}

// TestQuota: a namespace whose ResourceQuota is used up refuses the pod,
// and Create says so.
func TestQuota(t *testing.T) {
	t.Parallel()
	core := admin(t)
	ctx := context.Background()
	ns := "agentbox-quota-" + randID()
	if _, err := core.Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = core.Namespaces().Delete(context.Background(), ns, metav1.DeleteOptions{}) })
	q := &corev1.ResourceQuota{ObjectMeta: metav1.ObjectMeta{Name: "none"},
		Spec: corev1.ResourceQuotaSpec{Hard: corev1.ResourceList{corev1.ResourcePods: resource.MustParse("0")}}}
	if _, err := core.ResourceQuotas(ns).Create(ctx, q, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	rt := k8stest.Runtime(t, kubernetes.Options{Instance: "quota", Namespace: ns, RESTConfig: k8stest.Admin(t)})
	// The quota controller computes its status shortly after.
	var err error
	for i := 0; i < 50; i++ {
		if _, err = newSandbox(t, rt, nil); err != nil && strings.Contains(err.Error(), "ResourceQuota") {
			break
		}
		time.Sleep(100 * time.Millisecond)
	}
	if err == nil || !strings.Contains(err.Error(), "ResourceQuota") || !strings.Contains(err.Error(), "exceeded quota") {
		t.Fatalf("err = %v, want one about the namespace's quota", err)
	}
}

// TestNamespaceMissing: a namespace that does not exist is named in the
// error.
func TestNamespaceMissing(t *testing.T) {
	t.Parallel()
	rt := k8stest.Runtime(t, kubernetes.Options{Instance: "no-ns", Namespace: "agentbox-missing-" + randID(), RESTConfig: k8stest.Admin(t)})
	_, err := newSandbox(t, rt, nil)
	if err == nil || !strings.Contains(err.Error(), "does not exist") {
		t.Fatalf("err = %v, want one naming the missing namespace", err)
	}
}

// TestRBAC: the service account of deploy/kubernetes may do nothing
// outside the sandbox namespace.
func TestRBAC(t *testing.T) {
	t.Parallel()
	_, err := kubernetes.New(context.Background(), kubernetes.Options{RESTConfig: k8stest.ServiceAccount(t), Namespace: "default"})
	if err == nil || !strings.Contains(err.Error(), "may not list pods") {
		t.Fatalf("New in namespace default as the service account: err = %v, want a refusal naming the Role", err)
	}
}

// TestHostNetwork: network "host" is refused unless the runtime allows it;
// then the pod has the node's interfaces.
func TestHostNetwork(t *testing.T) {
	t.Parallel()
	rt := k8stest.Runtime(t, kubernetes.Options{Instance: "hostnet"})
	if _, err := newSandbox(t, rt, func(s *sandbox.Spec) { s.Network = sandbox.NetworkHost }); err == nil || !strings.Contains(err.Error(), "allow_host_network") {
		t.Fatalf("host network without permission: err = %v", err)
	}
	allowed := k8stest.Runtime(t, kubernetes.Options{Instance: "hostnet", AllowHostNetwork: true})
	sb, err := newSandbox(t, allowed, func(s *sandbox.Spec) { s.Network = sandbox.NetworkHost })
	if err != nil {
		t.Fatal(err)
	}
	host, err := os.ReadDir("/sys/class/net")
	if err != nil {
		t.Fatal(err)
	}
	res, err := sb.Exec(context.Background(), sandbox.ExecRequest{Argv: []string{"ls", "/sys/class/net"}})
	if err != nil {
		t.Fatal(err)
	}
	if got := strings.Fields(res.Stdout); len(got) != len(host) {
		t.Errorf("interfaces in a host-network sandbox = %v; the host has %d", got, len(host))
	}
}

// TestLabelValues: ids that are not valid label values (too long, '@')
// still select their pods, and the annotation keeps the exact value.
func TestLabelValues(t *testing.T) {
	t.Parallel()
	rt := k8stest.Runtime(t, kubernetes.Options{Instance: "labels"})
	user := "someone.with.a.rather.long.address@example.com-and-more-than-63-characters"
	wss := workspaces(t)
	ws, release, err := wss.Acquire(context.Background(), user, "c1")
	if err != nil {
		t.Fatal(err)
	}
	defer release()
	sb, err := rt.Create(context.Background(), sandbox.Spec{UserID: user, ChatID: "c1", Workspace: ws})
	if sb != nil {
		defer sb.Remove(context.Background())
	}
	if err != nil {
		t.Fatal(err)
	}
	list, err := admin(t).Pods(rt.Namespace()).List(context.Background(), metav1.ListOptions{
		LabelSelector: sandbox.LabelUser + "=" + kubernetes.LabelValue(user)})
	if err != nil {
		t.Fatal(err)
	}
	if len(list.Items) != 1 || list.Items[0].Name != sb.ID() || list.Items[0].Annotations[sandbox.LabelUser] != user {
		t.Errorf("selecting by user: %d pods (want %s with the exact user annotated)", len(list.Items), sb.ID())
	}
}

// TestRemoveAfterFailure: Remove of a sandbox whose pod already failed (its
// main process killed) still deletes it, with the grace period.
func TestRemoveAfterFailure(t *testing.T) {
	t.Parallel()
	rt := k8stest.Runtime(t, kubernetes.Options{Instance: "remove-failed"})
	sb, err := newSandbox(t, rt, nil)
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	// Everything of the sandbox user dies, the main process too: the
	// pod's container ends.
	_, _ = sb.Exec(ctx, sandbox.ExecRequest{Argv: []string{"kill -KILL -1"}, Shell: true})
	core := admin(t)
	for i := 0; i < 100; i++ {
		pod, err := core.Pods(rt.Namespace()).Get(ctx, sb.ID(), metav1.GetOptions{})
		if err != nil || pod.Status.Phase != corev1.PodRunning {
			break
		}
		time.Sleep(100 * time.Millisecond)
	}
	if _, err := sb.Exec(ctx, sandbox.ExecRequest{Argv: []string{"true"}}); !errors.Is(err, sandbox.ErrRemoved) {
		t.Errorf("exec in a pod whose container ended: err = %v, want ErrRemoved", err)
	}
	if err := sb.Remove(ctx); err != nil {
		t.Fatal(err)
	}
	if _, err := core.Pods(rt.Namespace()).Get(ctx, sb.ID(), metav1.GetOptions{}); !apierrors.IsNotFound(err) {
		t.Errorf("pod after Remove: %v, want NotFound", err)
	}
}

// TestCreateCanceled: a Create whose context ends while the pod starts
// leaves nothing behind.
func TestCreateCanceled(t *testing.T) {
	t.Parallel()
	rt := k8stest.Runtime(t, kubernetes.Options{Instance: "create-canceled"})
	ws, release, err := workspaces(t).Acquire(context.Background(), "u1", "c1")
	if err != nil {
		t.Fatal(err)
	}
	defer release()
	// A deadline shorter than a pod's start (about 1 s); shorter again
	// when one was not.
	for _, d := range []time.Duration{150 * time.Millisecond, 20 * time.Millisecond, 2 * time.Millisecond} {
		ctx, cancel := context.WithTimeout(context.Background(), d)
		var sb sandbox.Sandbox
		sb, err = rt.Create(ctx, sandbox.Spec{UserID: "u1", ChatID: "c1", Workspace: ws})
		cancel()
		if sb == nil {
			break
		}
		_ = sb.Remove(context.Background())
		err = fmt.Errorf("the pod ran within %s", d)
	}
	if !errors.Is(err, context.DeadlineExceeded) {
		t.Errorf("err = %v, want DeadlineExceeded", err)
	}
	if pods := ownPods(t, admin(t), rt); len(pods) != 0 {
		t.Errorf("pods left behind: %d", len(pods))
	}
}
