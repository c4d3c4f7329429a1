package kubernetes

import (
	"cmp"
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/agentbox/agentbox/sandbox"
	"github.com/agentbox/agentbox/sandbox/internal/poolslot"
)

// containerName is the sandbox container's name in every pod.
const containerName = "sandbox"

// Create starts a hardened pod for spec and waits until it runs: the
// workspace at /workspace (plus spec.Mounts), its main process idling,
// ready for exec. A failed Create leaves no pod behind. Errors that
// waiting cannot mend (an image that is missing or cannot be pulled, a
// rejected pod, a quota, a volume the node cannot mount, a workspace
// mount the pod would not see) come at once; an unschedulable pod fails
// after Options.StartTimeout with the scheduler's reason.
func (r *Runtime) Create(ctx context.Context, spec sandbox.Spec) (sandbox.Sandbox, error) {
	if spec.Image == "" {
		spec.Image = r.opts.Image
	}
	name := "agentbox-" + randHex(8)
	var hidden []sandbox.Hidden
	if spec.Workspace != nil {
		var err error
		if hidden, err = sandbox.PrepareHide(ctx, spec.Workspace, spec.Hide); err != nil {
			return nil, fmt.Errorf("kubernetes create: %w", err)
		}
	}
	pod, err := r.podFor(spec, hidden, name, time.Now(), "")
	if err != nil {
		return nil, err
	}
	sb := &Sandbox{rt: r, name: name, ws: spec.Workspace, env: copyEnv(spec.Env), terms: map[*terminal]struct{}{}}
	if err := r.startPod(ctx, sb, pod); err != nil {
		return nil, err
	}
	if err := r.checkWorkspaceSeen(ctx, name, spec.Workspace.Dir()); err != nil {
		return nil, errors.Join(fmt.Errorf("kubernetes create: pod %s/%s: %w", r.opts.Namespace, name, err), sb.Remove(ctx))
	}
	return sb, nil
}

// startPod creates pod for sb and waits until it runs. On failure no pod
// is left behind.
func (r *Runtime) startPod(ctx context.Context, sb *Sandbox, pod *corev1.Pod) error {
	name := pod.Name
	r.mu.Lock()
	closed := r.closed
	r.mu.Unlock()
	if closed {
		return fmt.Errorf("kubernetes create: runtime closed: %w", sandbox.ErrEngineUnavailable)
	}
	if err := ctx.Err(); err != nil {
		return err
	}
	if err := r.pods.start(ctx); err != nil {
		return err
	}
	r.startLease()
	r.tracked.add(name)
	cctx, cancel := r.call(ctx)
	created, err := r.api.create(cctx, pod)
	cancel()
	if err != nil {
		// The API server may have created it before the error (timeout).
		_ = r.deletePod(ctx, name, "", false)
		r.tracked.drop(name)
		return r.createErr(ctx, err)
	}
	sb.uid = string(created.UID)
	if err := r.pods.waitRunning(ctx, name); err != nil {
		if rerr := sb.Remove(ctx); rerr != nil {
			err = errors.Join(err, rerr)
		}
		return fmt.Errorf("kubernetes create: pod %s/%s: %w", r.opts.Namespace, name, err)
	}
	return nil
}

// isolation checks the isolation a spec asks for against the runtime
// classes this runtime has (runc always: the node's default handler).
func (r *Runtime) isolation(iso string) (string, error) {
	offered := []string{sandbox.IsolationRunc}
	for _, i := range sandbox.Isolations() {
		if i != sandbox.IsolationRunc && r.opts.RuntimeClasses[i] != "" {
			offered = append(offered, i)
		}
	}
	iso, err := sandbox.CheckIsolation(Name, iso, offered...)
	if err != nil {
		return "", fmt.Errorf("%w (sandbox.kubernetes.runtime_classes names the RuntimeClass of each)", err)
	}
	return iso, nil
}

// createErr explains a rejected pod create.
func (r *Runtime) createErr(ctx context.Context, err error) error {
	msg := err.Error()
	switch {
	case ctx.Err() != nil:
	case apierrors.IsForbidden(err) && strings.Contains(msg, "exceeded quota"):
		return fmt.Errorf("kubernetes create: the namespace %q's ResourceQuota leaves no room for another sandbox (wait for running ones to end, or raise the quota): %w", r.opts.Namespace, err)
	case apierrors.IsForbidden(err) && strings.Contains(msg, "RuntimeClass") && strings.Contains(msg, "not found"):
		return fmt.Errorf("kubernetes create: the cluster has no such RuntimeClass (apply deploy/kubernetes/runtimeclasses.yaml on nodes whose containerd has the handler, or set sandbox.kubernetes.runtime_classes): %w: %w", sandbox.ErrIsolation, err)
	case apierrors.IsForbidden(err) && strings.Contains(msg, "violates PodSecurity"):
		return fmt.Errorf("kubernetes create: the namespace %q's Pod Security admission rejects the sandbox pod "+
			"(with workspace_claim and bridge_listen, and without network \"host\", sandbox pods meet the restricted profile; "+
			"hostPath workspaces, the bridge's sockets and host network need a namespace that allows them, as deploy/kubernetes-single-node makes it on a one-node cluster): %w",
			r.opts.Namespace, err)
	case apierrors.IsNotFound(err):
		return fmt.Errorf("kubernetes create: namespace %q does not exist (apply deploy/kubernetes, or set the runtime's namespace): %w", r.opts.Namespace, err)
	case apierrors.IsForbidden(err):
		return fmt.Errorf("kubernetes create: these credentials may not create pods in namespace %q (apply deploy/kubernetes for the Role the runtime needs): %w", r.opts.Namespace, err)
	}
	return r.apiErr(ctx, "create", err)
}

// podFor builds the pod for spec: the one place that decides how a
// sandbox is confined. Hardening, as the Docker runtime's: non-root
// (Options.UID:GID, runAsNonRoot), every capability dropped, no privilege
// escalation, never privileged, seccomp RuntimeDefault, a read-only root
// with memory-backed /tmp and home, CPU, memory and ephemeral-storage
// limits (pids: the kubelet's podPidsLimit, a node setting), no
// service-account token, no service links, the pod network (none: loopback
// only on a cluster whose CNI gives it, or egress denied by the namespace's
// NetworkPolicy) or, only when allowed, the node's, and nothing of the
// node mounted but the workspace and the spec's mounts (volumes). The
// pause container shares the process namespace and reaps orphans, which
// Docker's init does for its containers. The spec's Env is not written
// into the pod, where anyone who may read pods would see it: every exec
// carries it (exec.go).
//
// A pooled pod (slot set: Prestart) has the slot's folders instead of a
// workspace (see pool.go).
func (r *Runtime) podFor(spec sandbox.Spec, hidden []sandbox.Hidden, name string, now time.Time, slot poolslot.Slot) (*corev1.Pod, error) {
	if spec.Workspace == nil && slot == "" {
		return nil, errors.New("kubernetes create: spec has no workspace")
	}
	if err := sandbox.ValidateID("user", spec.UserID); err != nil {
		return nil, fmt.Errorf("kubernetes create: %w", err)
	}
	if err := sandbox.ValidateID("chat", spec.ChatID); err != nil {
		return nil, fmt.Errorf("kubernetes create: %w", err)
	}
	if spec.Image == "" {
		return nil, errors.New("kubernetes create: no image (set the assistant's sandbox.image or the runtime's default image)")
	}
	network := cmp.Or(spec.Network, r.opts.Network)
	switch {
	case network != sandbox.NetworkNone && network != sandbox.NetworkHost:
		return nil, fmt.Errorf("kubernetes create: network %q: want %q or %q", network, sandbox.NetworkNone, sandbox.NetworkHost)
	case network == sandbox.NetworkHost && !r.opts.AllowHostNetwork:
		return nil, errors.New(`kubernetes create: network "host" is not allowed on this runtime: a hostNetwork pod sees the node's interfaces and every service listening on the node; ` +
			`use "none" with the bridge, or set the runtime's allow_host_network on a cluster where that is acceptable`)
	}
	isolation, err := r.isolation(spec.Isolation)
	if err != nil {
		return nil, fmt.Errorf("kubernetes create: %w", err)
	}
	mem, cpus := cmp.Or(spec.MemoryBytes, r.opts.MemoryBytes), cmp.Or(spec.CPUs, r.opts.CPUs)
	switch {
	case mem < 0, cpus < 0, spec.PidsLimit < 0:
		return nil, errors.New("kubernetes create: negative limit")
	case mem < 6<<20:
		return nil, fmt.Errorf("kubernetes create: memory %d bytes is below the minimum of 6 MiB", mem)
	}
	mounts, err := sandbox.CheckMounts(spec.Mounts)
	if err != nil {
		return nil, fmt.Errorf("kubernetes create: %w", err)
	}
	if _, err := sandbox.MergeEnv(spec.Env); err != nil {
		return nil, fmt.Errorf("kubernetes create: %w", err)
	}
	labels, annotations, err := r.metadata(spec, network, isolation, now)
	if err != nil {
		return nil, fmt.Errorf("kubernetes create: %w", err)
	}
	// The content of the file a hidden file shows (volumes).
	annotations[annotationEmpty] = ""
	vols, vms, err := r.volumes(spec, hidden, mounts, slot)
	if err != nil {
		return nil, fmt.Errorf("kubernetes create: %w", err)
	}

	limits := corev1.ResourceList{
		corev1.ResourceMemory:           *resource.NewQuantity(mem, resource.BinarySI),
		corev1.ResourceCPU:              *resource.NewMilliQuantity(int64(cpus*1000), resource.DecimalSI),
		corev1.ResourceEphemeralStorage: *resource.NewQuantity(r.opts.EphemeralBytes, resource.BinarySI),
	}
	requests := corev1.ResourceList{
		corev1.ResourceMemory:           *resource.NewQuantity(min(mem, r.opts.RequestMemoryBytes), resource.BinarySI),
		corev1.ResourceCPU:              *resource.NewMilliQuantity(int64(min(cpus, r.opts.RequestCPUs)*1000), resource.DecimalSI),
		corev1.ResourceEphemeralStorage: *resource.NewQuantity(min(r.opts.EphemeralBytes, 64<<20), resource.BinarySI),
	}
	yes, no := true, false
	uid, gid := r.opts.UID, r.opts.GID
	grace := int64(r.opts.GracePeriod.Round(time.Second) / time.Second)
	pod := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{
			Name:        name,
			Namespace:   r.opts.Namespace,
			Labels:      labels,
			Annotations: annotations,
		},
		Spec: corev1.PodSpec{
			RestartPolicy:                corev1.RestartPolicyNever,
			Hostname:                     "agentbox",
			AutomountServiceAccountToken: &no,
			EnableServiceLinks:           &no,
			ShareProcessNamespace:        &yes,
			HostNetwork:                  network == sandbox.NetworkHost,
			// The node's resolver (there is no cluster DNS to reach
			// without a network; with the host's, as Docker gives).
			DNSPolicy:                     corev1.DNSDefault,
			TerminationGracePeriodSeconds: &grace,
			SecurityContext: &corev1.PodSecurityContext{
				RunAsNonRoot:   &yes,
				RunAsUser:      &uid,
				RunAsGroup:     &gid,
				SeccompProfile: &corev1.SeccompProfile{Type: corev1.SeccompProfileTypeRuntimeDefault},
			},
			Containers: []corev1.Container{{
				Name:            containerName,
				Image:           spec.Image,
				ImagePullPolicy: r.opts.ImagePullPolicy,
				// The main process only idles: commands run through exec.
				Command:    []string{"sleep", "infinity"},
				WorkingDir: sandbox.Workdir,
				Env:        []corev1.EnvVar{{Name: "HOME", Value: r.opts.Home}},
				Resources:  corev1.ResourceRequirements{Limits: limits, Requests: requests},
				SecurityContext: &corev1.SecurityContext{
					Privileged:               &no,
					AllowPrivilegeEscalation: &no,
					ReadOnlyRootFilesystem:   &yes,
					RunAsNonRoot:             &yes,
					Capabilities:             &corev1.Capabilities{Drop: []corev1.Capability{"ALL"}},
				},
				VolumeMounts:             vms,
				TerminationMessagePolicy: corev1.TerminationMessageReadFile,
			}},
			Volumes: vols,
		},
	}
	if class := r.opts.RuntimeClasses[isolation]; class != "" {
		pod.Spec.RuntimeClassName = &class
	}
	return pod, nil
}

func copyEnv(m map[string]string) map[string]string {
	out := make(map[string]string, len(m))
	for k, v := range m {
		out[k] = v
	}
	return out
}

func randHex(n int) string {
	b := make([]byte, n)
	_, _ = rand.Read(b)
	return hex.EncodeToString(b)
}
