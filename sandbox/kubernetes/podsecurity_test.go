package kubernetes_test

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	manifests "github.com/agentbox/agentbox/deploy/kubernetes"
	"github.com/agentbox/agentbox/sandbox"
	"github.com/agentbox/agentbox/sandbox/kubernetes"
	"github.com/agentbox/agentbox/sandbox/kubernetes/k8stest"
)

// hostilePods are pods that credentials allowed to create pods in a
// sandbox namespace (the server's) might try there, each otherwise in
// the sandbox pods' shape, by what it adds.
func hostilePods() map[string]func(*corev1.Pod) {
	c := func(p *corev1.Pod) *corev1.SecurityContext { return p.Spec.Containers[0].SecurityContext }
	yes, root := true, int64(0)
	return map[string]func(*corev1.Pod){
		"privileged": func(p *corev1.Pod) { c(p).Privileged, c(p).AllowPrivilegeEscalation = &yes, nil },
		"root": func(p *corev1.Pod) {
			p.Spec.SecurityContext.RunAsUser, p.Spec.SecurityContext.RunAsNonRoot = &root, nil
			c(p).RunAsNonRoot = nil
		},
		"capabilities": func(p *corev1.Pod) { c(p).Capabilities.Add = []corev1.Capability{"SYS_ADMIN"} },
		"host pid":     func(p *corev1.Pod) { p.Spec.HostPID = true },
		"unconfined":   func(p *corev1.Pod) { p.Spec.SecurityContext.SeccompProfile.Type = corev1.SeccompProfileTypeUnconfined },
	}
}

// shapedPod is a pod in the sandbox pods' shape (non-root, no
// capabilities, no privilege escalation, RuntimeDefault seccomp).
func shapedPod(name string) *corev1.Pod {
	yes, no, uid := true, false, int64(1000)
	return &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: name},
		Spec: corev1.PodSpec{
			RestartPolicy: corev1.RestartPolicyNever,
			SecurityContext: &corev1.PodSecurityContext{RunAsNonRoot: &yes, RunAsUser: &uid,
				SeccompProfile: &corev1.SeccompProfile{Type: corev1.SeccompProfileTypeRuntimeDefault}},
			Containers: []corev1.Container{{
				Name: "c", Image: k8stest.Image(), ImagePullPolicy: corev1.PullNever, Command: []string{"sleep", "infinity"},
				SecurityContext: &corev1.SecurityContext{AllowPrivilegeEscalation: &no, RunAsNonRoot: &yes,
					Capabilities: &corev1.Capabilities{Drop: []corev1.Capability{"ALL"}}},
			}},
		},
	}
}

func podName(hostile string) string {
	return "hostile-" + strings.ToLower(strings.ReplaceAll(hostile, " ", "-"))
}

// refused checks that each hostile pod is refused in ns with a message
// holding want.
func refused(t *testing.T, ns, want string) {
	t.Helper()
	core := admin(t)
	for name, mod := range hostilePods() {
		p := shapedPod(podName(name))
		mod(p)
		_, err := core.Pods(ns).Create(context.Background(), p, metav1.CreateOptions{})
		if err == nil {
			_ = core.Pods(ns).Delete(context.Background(), p.Name, metav1.DeleteOptions{})
			t.Errorf("%s pod admitted in %s", name, ns)
			continue
		}
		// A cluster may refuse privileged containers everywhere (the
		// API server's --allow-privileged=false, as the local one does).
		cluster := name == "privileged" && strings.Contains(err.Error(), "disallowed by cluster policy")
		if !apierrors.IsForbidden(err) && !apierrors.IsInvalid(err) || !strings.Contains(err.Error(), want) && !cluster {
			t.Errorf("%s pod in %s: %v, want a refusal naming %q", name, ns, err, want)
		}
	}
}

// sandboxLabels are the labels deploy/kubernetes gives the sandbox
// namespace.
func sandboxLabels(t *testing.T) map[string]string {
	t.Helper()
	objs, err := manifests.Objects()
	if err != nil {
		t.Fatal(err)
	}
	for _, o := range objs {
		if o.GetKind() == "Namespace" && o.GetName() == manifests.SandboxNamespace {
			return o.GetLabels()
		}
	}
	t.Fatal("no sandbox namespace in deploy/kubernetes")
	return nil
}

// TestRestrictedSandboxNamespace: the sandbox namespace of
// deploy/kubernetes enforces the restricted Pod Security profile, so the
// server's credentials cannot start a privileged, root, capable,
// host-namespace or unconfined pod there, nor one with a hostPath volume
// or the node's network; the runtime's own pods with claim storage (and
// the agentbox binary mounted from the claim, as with bridge_listen) run
// there. One with hostPath storage is refused with a hint at the
// single-node variant.
func TestRestrictedSandboxNamespace(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	ns, wss := claimNamespace(t, "agentbox-restricted-", sandboxLabels(t))
	refused(t, ns, "violates PodSecurity")
	core := admin(t)
	for name, mod := range map[string]func(*corev1.Pod){
		"hostPath": func(p *corev1.Pod) {
			p.Spec.Volumes = []corev1.Volume{{Name: "root", VolumeSource: corev1.VolumeSource{HostPath: &corev1.HostPathVolumeSource{Path: "/"}}}}
		},
		"host network": func(p *corev1.Pod) { p.Spec.HostNetwork = true },
	} {
		p := shapedPod(podName(name))
		mod(p)
		if _, err := core.Pods(ns).Create(ctx, p, metav1.CreateOptions{}); err == nil || !strings.Contains(err.Error(), "violates PodSecurity") {
			t.Errorf("%s pod: %v, want refused by Pod Security", name, err)
		}
	}

	root := filepath.Dir(wss.Root())
	bin := filepath.Join(root, "agentbox-bin", "agentbox")
	if err := os.MkdirAll(filepath.Dir(bin), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(bin, []byte("#!/bin/sh\necho bridge binary\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	rt := k8stest.Runtime(t, kubernetes.Options{Instance: "restricted", Namespace: ns, RESTConfig: k8stest.Admin(t),
		Storage: kubernetes.Storage{Claim: "agentbox-data", ClaimRoot: root}})
	ws, release, err := wss.Acquire(ctx, "u1", "c1")
	if err != nil {
		t.Fatal(err)
	}
	defer release()
	sb, err := rt.Create(ctx, sandbox.Spec{UserID: "u1", ChatID: "c1", Workspace: ws,
		Mounts: []sandbox.Mount{{Source: bin, Target: "/opt/agentbox/agentbox"}}})
	if sb != nil {
		defer sb.Remove(ctx)
	}
	if err != nil {
		t.Fatalf("a sandbox pod with claim storage in the restricted namespace: %v", err)
	}
	res, err := sb.Exec(ctx, sandbox.ExecRequest{Argv: []string{"/opt/agentbox/agentbox"}})
	if err != nil || res.Stdout != "bridge binary\n" {
		t.Fatalf("exec: %+v, %v", res, err)
	}

	hostPath := k8stest.Runtime(t, kubernetes.Options{Instance: "restricted", Namespace: ns, RESTConfig: k8stest.Admin(t)})
	_, err = newSandbox(t, hostPath, nil)
	if err == nil || !strings.Contains(err.Error(), "violates PodSecurity") || !strings.Contains(err.Error(), "kubernetes-single-node") {
		t.Errorf("hostPath storage in the restricted namespace: %v, want Pod Security's refusal and the single-node hint", err)
	}
}

// TestSandboxPodPolicy: in the single-node variant's sandbox namespace,
// where Pod Security enforces nothing (hostPath workspaces), the
// ValidatingAdmissionPolicy still refuses pods outside the sandbox pods'
// shape, while the runtime's pods (every other test here) run.
func TestSandboxPodPolicy(t *testing.T) {
	t.Parallel()
	k8stest.ServiceAccount(t) // applies the single-node variant
	refused(t, manifests.SandboxNamespace, "agentbox-sandbox-pods")
}
