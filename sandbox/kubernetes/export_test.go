package kubernetes

import (
	"cmp"
	"time"

	corev1 "k8s.io/api/core/v1"

	"github.com/agentbox/agentbox/sandbox"
)

// StopHeartbeat ends the runtime's lease renewals as a crash would: the
// lease stays, unrenewed.
func (r *Runtime) StopHeartbeat() {
	r.lease.mu.Lock()
	cancel := r.lease.cancel
	r.lease.mu.Unlock()
	if cancel != nil {
		cancel()
	}
}

// LeaseName is the name of the lease of run.
func LeaseName(run string) string { return leaseName(run) }

// PodFor is the pod Create would make for spec, whose workspace hides
// nothing.
func (r *Runtime) PodFor(spec sandbox.Spec) (*corev1.Pod, error) {
	spec.Image = cmp.Or(spec.Image, r.opts.Image)
	return r.podFor(spec, nil, "agentbox-"+randHex(8), time.Now(), "")
}

// CheckByExec makes the claim of p check the pod through an exec, as on a
// host that does not see the node's processes.
func (p *Pooled) CheckByExec() { p.pid = 0 }

// HostPid is the pod's process the claim checks on this host (0: none).
func (p *Pooled) HostPid() int { return p.pid }
