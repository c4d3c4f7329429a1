package kubernetes

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"net/http"
	"sync"
	"time"

	coordinationv1 "k8s.io/api/coordination/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/rest"

	"github.com/agentbox/agentbox/sandbox"
)

// Liveness across hosts. A reaper can tell that a server on its own host
// died (its process is gone), but not one on another node: its pods would
// wait for the reaper's grace period (an hour). So a runtime that creates
// pods keeps a Lease (coordination.k8s.io) in the sandbox namespace, named
// after its run and renewed every third of LeaseDuration; a reaper takes
// the pods of a run whose lease has not been renewed for three durations
// (room for clocks that differ) as orphaned, whichever host made them. A
// run without a lease (credentials without the right, an older server)
// falls back to the process check and the grace period. Close deletes the
// lease.

// DefaultLeaseDuration is the default Options.LeaseDuration.
const DefaultLeaseDuration = 30 * time.Second

func init() {
	if err := coordinationv1.AddToScheme(apiScheme); err != nil {
		panic(err)
	}
}

// leaseAPI is the coordination/v1 Lease API in one namespace.
type leaseAPI struct {
	rc *rest.RESTClient
	ns string
}

func newLeaseAPI(cfg *rest.Config, hc *http.Client, ns string) (leaseAPI, error) {
	c := rest.CopyConfig(cfg)
	c.APIPath = "/apis"
	c.GroupVersion = &coordinationv1.SchemeGroupVersion
	c.NegotiatedSerializer = apiCodecs.WithoutConversion()
	if c.ContentType == "" {
		c.ContentType = runtime.ContentTypeJSON
	}
	rc, err := rest.RESTClientForConfigAndClient(c, hc)
	if err != nil {
		return leaseAPI{}, err
	}
	return leaseAPI{rc: rc, ns: ns}, nil
}

// leaseName is the lease of run: a DNS name derived from it.
func leaseName(run string) string {
	sum := sha256.Sum256([]byte(run))
	return "agentbox-run-" + hex.EncodeToString(sum[:10])
}

// leaseState is the heartbeat of one runtime.
type leaseState struct {
	api     leaseAPI
	once    sync.Once
	started bool
	cancel  context.CancelFunc // ends the heartbeat
	mu      sync.Mutex
	lease   *coordinationv1.Lease // the last one written
}

// startLease starts the heartbeat once (with the first Create).
func (r *Runtime) startLease() {
	if r.opts.LeaseDuration < 0 {
		return
	}
	r.lease.once.Do(func() {
		ctx, cancel := context.WithCancel(r.ctx)
		r.lease.mu.Lock()
		r.lease.started, r.lease.cancel = true, cancel
		r.lease.mu.Unlock()
		r.wg.Go(func() { r.heartbeat(ctx) })
	})
}

// heartbeat writes the lease and renews it until ctx ends.
func (r *Runtime) heartbeat(ctx context.Context) {
	d := r.opts.LeaseDuration
	t := time.NewTicker(d / 3)
	defer t.Stop()
	failing := false
	for {
		err := r.renew(ctx)
		switch {
		case err != nil && ctx.Err() == nil && !failing:
			failing = true
			r.opts.Logger.Warn("sandbox lease not renewed: pods of this server are reaped by others only after the grace period should it die", "lease", leaseName(r.run), "error", err)
			if apierrors.IsForbidden(err) {
				return // the Role lacks leases: nothing will change
			}
		case err == nil:
			failing = false
		}
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
	}
}

// renew creates the lease or moves its renew time to now.
func (r *Runtime) renew(ctx context.Context) error {
	cctx, cancel := r.call(ctx)
	defer cancel()
	r.lease.mu.Lock()
	defer r.lease.mu.Unlock()
	now := metav1.NewMicroTime(time.Now())
	if l := r.lease.lease; l != nil {
		l.Spec.RenewTime = &now
		out := &coordinationv1.Lease{}
		err := r.lease.api.rc.Put().Namespace(r.lease.api.ns).Resource("leases").Name(l.Name).Body(l).Do(cctx).Into(out)
		if err == nil {
			r.lease.lease = out
			return nil
		}
		if !apierrors.IsConflict(err) && !apierrors.IsNotFound(err) {
			return err
		}
		r.lease.lease = nil // changed or gone: write it anew
		_ = r.lease.api.rc.Delete().Namespace(r.lease.api.ns).Resource("leases").Name(l.Name).Do(cctx).Error()
	}
	secs := int32(r.opts.LeaseDuration / time.Second)
	holder := r.run
	l := &coordinationv1.Lease{
		ObjectMeta: metav1.ObjectMeta{Name: leaseName(r.run), Namespace: r.lease.api.ns,
			Labels: map[string]string{sandbox.LabelProduct: ProductLabelValue, sandbox.LabelInstance: LabelValue(r.opts.Instance)}},
		Spec: coordinationv1.LeaseSpec{HolderIdentity: &holder, LeaseDurationSeconds: &secs, AcquireTime: &now, RenewTime: &now},
	}
	out := &coordinationv1.Lease{}
	if err := r.lease.api.rc.Post().Namespace(r.lease.api.ns).Resource("leases").Body(l).Do(cctx).Into(out); err != nil {
		return err
	}
	r.lease.lease = out
	return nil
}

// stopLease deletes the lease once the heartbeat ended (Close).
func (r *Runtime) stopLease(ctx context.Context) {
	r.lease.mu.Lock()
	started := r.lease.started
	r.lease.mu.Unlock()
	if !started {
		return
	}
	cctx, cancel := context.WithTimeout(ctx, r.opts.CallTimeout)
	defer cancel()
	_ = r.lease.api.rc.Delete().Namespace(r.lease.api.ns).Resource("leases").Name(leaseName(r.run)).Do(cctx).Error()
}

// expiredRuns lists the runs whose lease exists, each with whether it
// expired (reaper): not renewed for three of its durations.
func (r *Runtime) expiredRuns(ctx context.Context) (map[string]bool, error) {
	cctx, cancel := r.call(ctx)
	defer cancel()
	list := &coordinationv1.LeaseList{}
	err := r.lease.api.rc.Get().Namespace(r.lease.api.ns).Resource("leases").
		VersionedParams(&metav1.ListOptions{LabelSelector: productSelector()}, paramCodec).Do(cctx).Into(list)
	if err != nil {
		return nil, err
	}
	now := time.Now()
	out := map[string]bool{}
	for _, l := range list.Items {
		s := l.Spec
		if s.HolderIdentity == nil || s.RenewTime == nil || s.LeaseDurationSeconds == nil {
			continue
		}
		d := time.Duration(*s.LeaseDurationSeconds) * time.Second
		out[*s.HolderIdentity] = now.Sub(s.RenewTime.Time) > 3*d
	}
	return out, nil
}
