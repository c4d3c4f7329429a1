// Package k8stest gives tests a kubernetes sandbox runtime on the local
// cluster of `make cluster`, set up as a deployment would be: the
// manifests of deploy/kubernetes applied, and the runtime acting as the
// server's service account, so a right the Role lacks fails the tests.
package k8stest

import (
	"context"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	authv1 "k8s.io/api/authentication/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	corev1client "k8s.io/client-go/kubernetes/typed/core/v1"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"

	manifests "github.com/agentbox/agentbox/deploy/kubernetes"
	"github.com/agentbox/agentbox/internal/testenv"
	"github.com/agentbox/agentbox/sandbox"
	"github.com/agentbox/agentbox/sandbox/kubernetes"
)

// Image is the sandbox image the tests run: AGENTBOX_CLAUDE_IMAGE (the
// Makefile sets it), else the product's Claude image; `make cluster`
// imports it into the cluster.
func Image() string {
	if img := os.Getenv("AGENTBOX_CLAUDE_IMAGE"); img != "" {
		return img
	}
	return testenv.ClaudeImage
}

// Admin requires the local cluster and returns its admin configuration.
func Admin(t testing.TB) *rest.Config {
	t.Helper()
	cfg, err := clientcmd.BuildConfigFromFlags("", testenv.Cluster(t))
	if err != nil {
		t.Fatalf("load kubeconfig: %v", err)
	}
	cfg.QPS, cfg.Burst = 50, 100
	return cfg
}

var (
	setupOnce sync.Once
	setupErr  error
)

// ServiceAccount requires the local cluster, applies
// deploy/kubernetes-single-node and the RuntimeClasses of
// deploy/kubernetes/runtimeclasses (once per test binary: the tests run the
// server on the node, with hostPath workspaces and host network) and
// returns a configuration that acts as the server's service account, with
// a token valid for an hour.
func ServiceAccount(t testing.TB) *rest.Config {
	t.Helper()
	admin := Admin(t)
	setupOnce.Do(func() {
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		defer cancel()
		objs, err := manifests.Objects()
		if err == nil {
			var rcs []*unstructured.Unstructured
			rcs, err = manifests.RuntimeClasses()
			objs = append(manifests.SingleNode(objs), rcs...)
		}
		if err == nil {
			_, err = manifests.Apply(ctx, admin, objs, false)
		}
		if err == nil {
			err = policyActive(ctx, admin)
		}
		setupErr = err
	})
	if setupErr != nil {
		t.Fatalf("apply deploy/kubernetes: %v", setupErr)
	}
	core, err := corev1client.NewForConfig(admin)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	// The token controller may not have seen the new account yet.
	var tok *authv1.TokenRequest
	for {
		exp := int64(3600)
		tok, err = core.ServiceAccounts(manifests.ServerNamespace).CreateToken(ctx, manifests.ServiceAccount,
			&authv1.TokenRequest{Spec: authv1.TokenRequestSpec{ExpirationSeconds: &exp}}, metav1.CreateOptions{})
		if err == nil || ctx.Err() != nil {
			break
		}
		time.Sleep(100 * time.Millisecond)
	}
	if err != nil {
		t.Fatalf("token for service account %s/%s: %v", manifests.ServerNamespace, manifests.ServiceAccount, err)
	}
	return &rest.Config{
		Host:            admin.Host,
		TLSClientConfig: rest.TLSClientConfig{CAData: admin.TLSClientConfig.CAData, CAFile: admin.TLSClientConfig.CAFile},
		BearerToken:     tok.Status.Token,
		QPS:             50,
		Burst:           100,
	}
}

// ServiceAccountKubeconfig writes a kubeconfig acting as the server's
// service account (ServiceAccount), for an `agentbox serve` of a test, and
// returns its path.
func ServiceAccountKubeconfig(t testing.TB) string {
	t.Helper()
	sa := ServiceAccount(t)
	cfg := clientcmdapi.NewConfig()
	cfg.Clusters["local"] = &clientcmdapi.Cluster{Server: sa.Host, CertificateAuthority: sa.CAFile, CertificateAuthorityData: sa.CAData}
	cfg.AuthInfos["agentbox"] = &clientcmdapi.AuthInfo{Token: sa.BearerToken}
	cfg.Contexts["agentbox"] = &clientcmdapi.Context{Cluster: "local", AuthInfo: "agentbox"}
	cfg.CurrentContext = "agentbox"
	path := filepath.Join(t.TempDir(), "kubeconfig")
	if err := clientcmd.WriteToFile(*cfg, path); err != nil {
		t.Fatal(err)
	}
	return path
}

// policyActive waits until the API server enforces the sandbox pod
// policy of deploy/kubernetes (it loads a new ValidatingAdmissionPolicy
// a moment after it is stored): a root pod's dry run in the sandbox
// namespace is refused.
func policyActive(ctx context.Context, cfg *rest.Config) error {
	core, err := corev1client.NewForConfig(cfg)
	if err != nil {
		return err
	}
	root := int64(0)
	pod := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "policy-probe"}, Spec: corev1.PodSpec{
		SecurityContext: &corev1.PodSecurityContext{RunAsUser: &root},
		Containers:      []corev1.Container{{Name: "c", Image: Image()}}}}
	for {
		_, err := core.Pods(manifests.SandboxNamespace).Create(ctx, pod, metav1.CreateOptions{DryRun: []string{metav1.DryRunAll}})
		if err != nil && strings.Contains(err.Error(), "agentbox-sandbox-pods") {
			return nil
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("the sandbox pod policy is not enforced (a root pod's dry run: %v): %w", err, ctx.Err())
		case <-time.After(100 * time.Millisecond):
		}
	}
}

// Runtime returns a kubernetes runtime on the local cluster in the
// sandbox namespace of deploy/kubernetes, acting as the server's service
// account, with the pull policy Never (the cluster has no registry) and
// opts' other settings; it is closed when the test ends.
func Runtime(t testing.TB, opts kubernetes.Options) *kubernetes.Runtime {
	t.Helper()
	if opts.RESTConfig == nil {
		opts.RESTConfig = ServiceAccount(t)
	}
	if opts.Namespace == "" {
		opts.Namespace = manifests.SandboxNamespace
	}
	if opts.ImagePullPolicy == "" {
		opts.ImagePullPolicy = corev1.PullNever
	}
	if opts.Image == "" {
		opts.Image = Image()
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	rt, err := kubernetes.New(ctx, opts)
	if err != nil {
		t.Fatalf("kubernetes runtime: %v", err)
	}
	t.Cleanup(func() { _ = rt.Close(context.Background()) })
	return rt
}

// Pods lists the names of the pods rt made that still exist (deleted or
// not), as an administrator sees them.
func Pods(t testing.TB, rt *kubernetes.Runtime) []string {
	t.Helper()
	core, err := corev1client.NewForConfig(Admin(t))
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	list, err := core.Pods(rt.Namespace()).List(ctx, metav1.ListOptions{
		LabelSelector: sandbox.LabelRun + "=" + kubernetes.LabelValue(rt.RunID())})
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, p := range list.Items {
		names = append(names, p.Name)
	}
	return names
}

// Requests counts the requests a client makes to the API server, by
// "VERB resource[/subresource]" (an exec is "GET pods/exec" over
// WebSocket); a watch counts once, when it starts.
type Requests struct {
	mu sync.Mutex
	n  map[string]int
}

// Wrap makes cfg count its requests in r (rest.Config.WrapTransport, which
// exec connections use too).
func (r *Requests) Wrap(cfg *rest.Config) *rest.Config {
	cfg = rest.CopyConfig(cfg)
	prev := cfg.WrapTransport
	cfg.WrapTransport = func(rt http.RoundTripper) http.RoundTripper {
		if prev != nil {
			rt = prev(rt)
		}
		return countingTransport{rt: rt, r: r}
	}
	return cfg
}

// Reset forgets the counts so far.
func (r *Requests) Reset() {
	r.mu.Lock()
	r.n = nil
	r.mu.Unlock()
}

// Counts returns the counts so far and their total.
func (r *Requests) Counts() (map[string]int, int) {
	r.mu.Lock()
	defer r.mu.Unlock()
	out, total := map[string]int{}, 0
	for k, v := range r.n {
		out[k] = v
		total += v
	}
	return out, total
}

type countingTransport struct {
	rt http.RoundTripper
	r  *Requests
}

func (t countingTransport) RoundTrip(req *http.Request) (*http.Response, error) {
	// /api/v1/namespaces/NS/pods[/NAME[/SUB]]
	parts := strings.Split(strings.Trim(req.URL.Path, "/"), "/")
	what := req.URL.Path
	if len(parts) >= 5 && parts[0] == "api" && parts[2] == "namespaces" {
		what = parts[4]
		if len(parts) >= 7 {
			what += "/" + parts[6]
		}
	}
	if req.URL.Query().Get("watch") == "true" {
		what += " (watch)"
	}
	t.r.mu.Lock()
	if t.r.n == nil {
		t.r.n = map[string]int{}
	}
	t.r.n[req.Method+" "+what]++
	t.r.mu.Unlock()
	return t.rt.RoundTrip(req)
}

// PodCgroup reads file of the cgroup controller (v1: "pids", "memory";
// v2: "") of sb's pod (the parent of the sandbox container's cgroup) on
// this host, which is the local cluster's node; the kubelet sets pod-level
// limits there.
func PodCgroup(t testing.TB, sb sandbox.Sandbox, controller, file string) string {
	t.Helper()
	res, err := sb.Exec(context.Background(), sandbox.ExecRequest{Argv: []string{"cat", "/proc/self/cgroup"}})
	if err != nil {
		t.Fatal(err)
	}
	for _, line := range strings.Split(res.Stdout, "\n") {
		parts := strings.SplitN(line, ":", 3)
		if len(parts) != 3 {
			continue
		}
		var dir string
		switch {
		case controller != "" && slices.Contains(strings.Split(parts[1], ","), controller):
			dir = filepath.Join("/sys/fs/cgroup", parts[1], filepath.Dir(parts[2]))
		case parts[0] == "0" && parts[1] == "":
			dir = filepath.Join("/sys/fs/cgroup", filepath.Dir(parts[2]))
		default:
			continue
		}
		b, err := os.ReadFile(filepath.Join(dir, file))
		if err != nil {
			t.Fatalf("pod cgroup: %v", err)
		}
		return strings.TrimSpace(string(b))
	}
	t.Fatalf("no %s cgroup in %q", controller, res.Stdout)
	return ""
}

// SharedTempDir requires the local cluster and returns a new folder under
// its shared folder (.cache/cluster/shared, removed when the test ends):
// what this host mounts there later, such as a workspace's loop-mounted
// disk image, reaches the node, whose mount namespace is otherwise its
// own. Tests whose workspaces have disk limits keep them there (e.g.
// t.Setenv("TMPDIR", SharedTempDir(t))).
func SharedTempDir(t testing.TB) string {
	t.Helper()
	shared := filepath.Join(filepath.Dir(testenv.Cluster(t)), "shared")
	if _, err := os.Stat(shared); err != nil {
		t.Fatalf("the local cluster's shared folder: %v (restart it: make cluster-down cluster)", err)
	}
	dir, err := os.MkdirTemp(shared, "t-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = os.RemoveAll(dir) })
	return dir
}
