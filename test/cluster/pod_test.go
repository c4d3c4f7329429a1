// Package cluster checks the local single-node Kubernetes cluster (`make
// cluster`) can run what the kubernetes sandbox runtime needs: a pod of
// the product's sandbox image with the Docker runtime's hardening, a
// loopback-only network, a hostPath workspace, and exec through the API
// with exact stdout, stderr and exit codes.
package cluster

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/httpstream"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/kubernetes/scheme"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
	"k8s.io/client-go/tools/remotecommand"
	utilexec "k8s.io/client-go/util/exec"

	"github.com/agentbox/agentbox/internal/testenv"
)

const (
	namespace = "default"
	container = "sandbox"
	agentUID  = 1000
)

// client is a clientset and the REST config exec needs.
type client struct {
	cs  kubernetes.Interface
	cfg *rest.Config
}

func newClient(tb testing.TB) *client {
	tb.Helper()
	cfg, err := clientcmd.BuildConfigFromFlags("", testenv.Cluster(tb))
	if err != nil {
		tb.Fatalf("load kubeconfig: %v", err)
	}
	cfg.QPS, cfg.Burst = 100, 200
	cs, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		tb.Fatalf("clientset: %v", err)
	}
	return &client{cs: cs, cfg: cfg}
}

// sandboxImage is the product's sandbox image, which `make cluster`
// imports into the cluster under the same name.
func sandboxImage() string {
	if img := os.Getenv("AGENTBOX_CLAUDE_IMAGE"); img != "" {
		return img
	}
	return testenv.ClaudeImage
}

// workspace makes a host folder the agent user (uid 1000) owns, for a
// hostPath volume; its parents must be traversable by that user.
func workspace(tb testing.TB) string {
	tb.Helper()
	dir, err := os.MkdirTemp("", "agentbox-cluster-ws-")
	tb.Cleanup(func() { _ = os.RemoveAll(dir) })
	if err != nil {
		tb.Fatal(err)
	}
	if err := os.Chown(dir, agentUID, agentUID); err != nil {
		tb.Fatalf("chown workspace to uid %d (the cluster runs as root, so must its tests): %v", agentUID, err)
	}
	return dir
}

// hardenedPod is a sandbox pod as the kubernetes runtime will create it:
// non-root uid 1000, every capability dropped, no privilege escalation,
// seccomp RuntimeDefault, read-only root with memory-backed /tmp and home,
// CPU, memory and ephemeral-storage limits, no service-account token, the
// workspace on a hostPath volume, and the cluster's loopback-only network.
func hardenedPod(image, ws string) *corev1.Pod {
	yes, no := true, false
	uid := int64(agentUID)
	grace := int64(1)
	limits := corev1.ResourceList{
		corev1.ResourceCPU:              resource.MustParse("500m"),
		corev1.ResourceMemory:           resource.MustParse("256Mi"),
		corev1.ResourceEphemeralStorage: resource.MustParse("1Gi"),
	}
	tmpSize := resource.MustParse("64Mi")
	dirType := corev1.HostPathDirectory
	return &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{
			GenerateName: "agentbox-cluster-test-",
			Labels:       map[string]string{"dev.agentbox.test": "cluster"},
		},
		Spec: corev1.PodSpec{
			RestartPolicy:                 corev1.RestartPolicyNever,
			DNSPolicy:                     corev1.DNSDefault,
			AutomountServiceAccountToken:  &no,
			EnableServiceLinks:            &no,
			TerminationGracePeriodSeconds: &grace,
			SecurityContext: &corev1.PodSecurityContext{
				RunAsNonRoot:   &yes,
				RunAsUser:      &uid,
				RunAsGroup:     &uid,
				SeccompProfile: &corev1.SeccompProfile{Type: corev1.SeccompProfileTypeRuntimeDefault},
			},
			Containers: []corev1.Container{{
				Name:            container,
				Image:           image,
				ImagePullPolicy: corev1.PullNever,
				Command:         []string{"sleep", "infinity"},
				WorkingDir:      "/workspace",
				Resources:       corev1.ResourceRequirements{Limits: limits, Requests: limits},
				SecurityContext: &corev1.SecurityContext{
					Privileged:               &no,
					AllowPrivilegeEscalation: &no,
					ReadOnlyRootFilesystem:   &yes,
					RunAsNonRoot:             &yes,
					Capabilities:             &corev1.Capabilities{Drop: []corev1.Capability{"ALL"}},
				},
				VolumeMounts: []corev1.VolumeMount{
					{Name: "workspace", MountPath: "/workspace"},
					{Name: "tmp", MountPath: "/tmp"},
					{Name: "home", MountPath: "/home/agent"},
				},
			}},
			Volumes: []corev1.Volume{
				{Name: "workspace", VolumeSource: corev1.VolumeSource{HostPath: &corev1.HostPathVolumeSource{Path: ws, Type: &dirType}}},
				{Name: "tmp", VolumeSource: corev1.VolumeSource{EmptyDir: &corev1.EmptyDirVolumeSource{Medium: corev1.StorageMediumMemory, SizeLimit: &tmpSize}}},
				{Name: "home", VolumeSource: corev1.VolumeSource{EmptyDir: &corev1.EmptyDirVolumeSource{Medium: corev1.StorageMediumMemory, SizeLimit: &tmpSize}}},
			},
		},
	}
}

// startPod creates pod, registers its deletion, waits until it runs and
// returns it with how long create → Running took.
func (c *client) startPod(tb testing.TB, pod *corev1.Pod) (*corev1.Pod, time.Duration) {
	tb.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	start := time.Now()
	created, err := c.cs.CoreV1().Pods(namespace).Create(ctx, pod, metav1.CreateOptions{})
	if created != nil && created.Name != "" {
		tb.Cleanup(func() { c.deletePod(tb, created.Name) })
	}
	if err != nil {
		tb.Fatalf("create pod: %v", err)
	}
	for {
		p, err := c.cs.CoreV1().Pods(namespace).Get(ctx, created.Name, metav1.GetOptions{})
		if err != nil {
			tb.Fatalf("get pod %s: %v", created.Name, err)
		}
		if p.Status.Phase == corev1.PodRunning {
			return p, time.Since(start)
		}
		for _, st := range p.Status.ContainerStatuses {
			if w := st.State.Waiting; w != nil && w.Reason == "ErrImageNeverPull" {
				testenv.Missing(tb, "the image "+pod.Spec.Containers[0].Image+" in the cluster (`make cluster` imports it from Docker)")
			}
		}
		if p.Status.Phase == corev1.PodFailed || p.Status.Phase == corev1.PodSucceeded {
			tb.Fatalf("pod %s ended before running: %s", p.Name, podState(p))
		}
		select {
		case <-ctx.Done():
			tb.Fatalf("pod %s not running after 2m: %s", p.Name, podState(p))
		case <-time.After(50 * time.Millisecond):
		}
	}
}

// podState summarises why a pod is not running, for failure messages.
func podState(p *corev1.Pod) string {
	s := fmt.Sprintf("phase %s %s", p.Status.Phase, p.Status.Message)
	for _, st := range p.Status.ContainerStatuses {
		if w := st.State.Waiting; w != nil {
			s += fmt.Sprintf("; %s waiting: %s %s", st.Name, w.Reason, w.Message)
		}
		if t := st.State.Terminated; t != nil {
			s += fmt.Sprintf("; %s terminated: %s exit %d %s", st.Name, t.Reason, t.ExitCode, t.Message)
		}
	}
	return s
}

// deletePod deletes a pod and waits until it is gone, which with a
// grace period (the pod's, 1 s) means the kubelet has stopped its
// containers; a zero grace period would remove the object at once and
// leave them running for a while.
func (c *client) deletePod(tb testing.TB, name string) time.Duration {
	tb.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	start := time.Now()
	err := c.cs.CoreV1().Pods(namespace).Delete(ctx, name, metav1.DeleteOptions{})
	if apierrors.IsNotFound(err) {
		return 0
	}
	if err != nil {
		tb.Errorf("delete pod %s: %v", name, err)
		return 0
	}
	for {
		_, err := c.cs.CoreV1().Pods(namespace).Get(ctx, name, metav1.GetOptions{})
		if apierrors.IsNotFound(err) {
			return time.Since(start)
		}
		select {
		case <-ctx.Done():
			tb.Errorf("pod %s still there 1m after its deletion", name)
			return 0
		case <-time.After(100 * time.Millisecond):
		}
	}
}

// result is what one exec returned.
type result struct {
	stdout, stderr string
	code           int
}

// exec runs argv in the pod's sandbox container through the API server
// (WebSocket, falling back to SPDY as kubectl does) and returns its output
// and exit code; err is only for failures of the exec itself.
func (c *client) exec(ctx context.Context, pod string, stdin io.Reader, argv ...string) (result, error) {
	req := c.cs.CoreV1().RESTClient().Post().Resource("pods").Namespace(namespace).Name(pod).SubResource("exec").
		VersionedParams(&corev1.PodExecOptions{
			Container: container,
			Command:   argv,
			Stdin:     stdin != nil,
			Stdout:    true,
			Stderr:    true,
		}, scheme.ParameterCodec)
	ws, err := remotecommand.NewWebSocketExecutor(c.cfg, "GET", req.URL().String())
	if err != nil {
		return result{}, fmt.Errorf("websocket executor: %w", err)
	}
	spdy, err := remotecommand.NewSPDYExecutor(c.cfg, "POST", req.URL())
	if err != nil {
		return result{}, fmt.Errorf("spdy executor: %w", err)
	}
	executor, err := remotecommand.NewFallbackExecutor(ws, spdy, func(err error) bool {
		return httpstream.IsUpgradeFailure(err) || httpstream.IsHTTPSProxyError(err)
	})
	if err != nil {
		return result{}, fmt.Errorf("fallback executor: %w", err)
	}
	var stdout, stderr bytes.Buffer
	err = executor.StreamWithContext(ctx, remotecommand.StreamOptions{Stdin: stdin, Stdout: &stdout, Stderr: &stderr})
	res := result{stdout: stdout.String(), stderr: stderr.String()}
	var exit utilexec.ExitError
	if errors.As(err, &exit) && exit.Exited() {
		res.code = exit.ExitStatus()
		return res, nil
	}
	if err != nil {
		return res, fmt.Errorf("exec %q: %w", argv, err)
	}
	return res, nil
}

func TestHardenedSandboxPod(t *testing.T) {
	c := newClient(t)
	ws := workspace(t)
	pod, running := c.startPod(t, hardenedPod(sandboxImage(), ws))
	t.Logf("pod %s: create → Running in %v", pod.Name, running.Round(time.Millisecond))

	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	cases := []struct {
		name  string
		stdin string
		argv  []string
		want  result
	}{
		{"exact streams and exit code", "", []string{"sh", "-c", "printf 'out\\n'; printf 'err\\n' >&2; exit 3"}, result{"out\n", "err\n", 3}},
		{"stdin", "hello\nworld", []string{"cat"}, result{"hello\nworld", "", 0}},
		{"loopback only", "", []string{"ls", "/sys/class/net"}, result{"lo\n", "", 0}},
		{"lo is up", "", []string{"cat", "/sys/class/net/lo/operstate"}, result{"unknown\n", "", 0}},
		{"uid and gid", "", []string{"sh", "-c", "id -u; id -g"}, result{"1000\n1000\n", "", 0}},
		{"no capabilities, no new privileges, seccomp", "", []string{"grep", "-E", "^(CapPrm|CapEff|CapBnd|NoNewPrivs|Seccomp):", "/proc/self/status"},
			result{"CapPrm:\t0000000000000000\nCapEff:\t0000000000000000\nCapBnd:\t0000000000000000\nNoNewPrivs:\t1\nSeccomp:\t2\n", "", 0}},
		{"read-only root", "", []string{"sh", "-c", "touch /usr/x 2>/dev/null || echo refused"}, result{"refused\n", "", 0}},
		{"memory-backed tmp", "", []string{"sh", "-c", "stat -f -c %T /tmp /home/agent && echo x >/tmp/f && cat /tmp/f"}, result{"tmpfs\ntmpfs\nx\n", "", 0}},
		{"memory limit", "", []string{"sh", "-c", "cat /sys/fs/cgroup/memory.max 2>/dev/null || cat /sys/fs/cgroup/memory/memory.limit_in_bytes"}, result{"268435456\n", "", 0}},
		{"workspace", "", []string{"sh", "-c", "pwd && echo from-pod >/workspace/out.txt"}, result{"/workspace\n", "", 0}},
		{"no service-account token", "", []string{"sh", "-c", "test -e /var/run/secrets/kubernetes.io || echo none"}, result{"none\n", "", 0}},
		{"missing command", "", []string{"sh", "-c", "exec no-such-command"}, result{"", "sh: 1: exec: no-such-command: not found\n", 127}},
	}
	for _, tc := range cases {
		var stdin io.Reader
		if tc.stdin != "" {
			stdin = strings.NewReader(tc.stdin)
		}
		start := time.Now()
		got, err := c.exec(ctx, pod.Name, stdin, tc.argv...)
		if err != nil {
			t.Fatalf("%s: %v", tc.name, err)
		}
		t.Logf("%s: exec in %v", tc.name, time.Since(start).Round(time.Millisecond))
		if got != tc.want {
			t.Errorf("%s: %q = %+v, want %+v", tc.name, tc.argv, got, tc.want)
		}
	}
	data, err := os.ReadFile(filepath.Join(ws, "out.txt"))
	if err != nil || string(data) != "from-pod\n" {
		t.Errorf("workspace file on the host = %q, %v; want %q", data, err, "from-pod\n")
	}
	t.Logf("pod %s: delete → gone in %v", pod.Name, c.deletePod(t, pod.Name).Round(time.Millisecond))
}

// TestHostNetworkPod checks a hostNetwork pod runs and sees the host's
// interfaces (the kubernetes runtime's `host` network).
func TestHostNetworkPod(t *testing.T) {
	c := newClient(t)
	pod := hardenedPod(sandboxImage(), workspace(t))
	pod.Spec.HostNetwork = true
	pod, _ = c.startPod(t, pod)
	entries, err := os.ReadDir("/sys/class/net")
	if err != nil {
		t.Fatal(err)
	}
	var host []string
	for _, e := range entries {
		host = append(host, e.Name())
	}
	sort.Strings(host)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	got, err := c.exec(ctx, pod.Name, nil, "ls", "/sys/class/net")
	if err != nil {
		t.Fatal(err)
	}
	if want := strings.Join(host, "\n") + "\n"; got.stdout != want || got.code != 0 {
		t.Errorf("interfaces in a hostNetwork pod = %+v, want stdout %q", got, want)
	}
}
