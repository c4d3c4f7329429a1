// Package kubernetes is the sandbox runtime for Kubernetes: one hardened
// Pod per sandbox in a configured namespace, created, watched and deleted
// through the API server (k8s.io/client-go), commands run through the exec
// subresource (WebSocket, SPDY as the fallback).
//
// The Docker runtime's hardening becomes the Pod's security context and
// limits (see podFor); the workspace is a hostPath volume on a single-node
// cluster, or a subPath of a PersistentVolumeClaim that every node and
// server replica can mount (see volumes.go, the one place that decides what
// is mounted). Every API call has its own short timeout, so an API server
// that does not answer yields an error wrapping sandbox.ErrEngineUnavailable,
// never a hang. Pods carry the sandbox labels, and a reaper deletes those
// of owners that are gone. A warm pool's pods are made ahead of demand and
// claimed by label, the chat's workspace mounted into the running pod from
// the node (pool.go).
package kubernetes

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"maps"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/validation"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"

	"github.com/agentbox/agentbox/images"
	"github.com/agentbox/agentbox/sandbox"
)

// Name is the runtime's registry name.
const Name = "kubernetes"

// ProductLabelValue is the value of sandbox.LabelProduct on our pods.
const ProductLabelValue = "agentbox"

// Defaults applied when Options and Spec leave a value at zero.
const (
	DefaultNamespace   = "agentbox-sandboxes"
	DefaultImage       = images.Claude
	DefaultPullPolicy  = corev1.PullIfNotPresent
	DefaultMemoryBytes = 2 << 30
	DefaultCPUs        = 2.0
	// DefaultRequestMemoryBytes and DefaultRequestCPUs are what the
	// scheduler reserves per sandbox (capped at the limits): an idle
	// agent CLI holds ~300 MiB and little CPU, so reserving the limits
	// would cut the sandboxes per node several times over.
	DefaultRequestMemoryBytes = 512 << 20
	DefaultRequestCPUs        = 0.25
	// DefaultEphemeralBytes bounds the pod's node-local disk use beyond
	// the workspace: its logs and writable layer (the root is read-only
	// and /tmp and home are memory-backed).
	DefaultEphemeralBytes = 1 << 30
	DefaultUID            = 1000
	DefaultGID            = 1000
	DefaultHome           = "/home/agent"
	DefaultTmpfsSize      = 512 << 20
	DefaultGracePeriod    = time.Second
	DefaultStartTimeout   = time.Minute
	DefaultCallTimeout    = 15 * time.Second
	// DefaultReapGrace is how long a pod of another instance may live
	// before the reaper deletes it.
	DefaultReapGrace = time.Hour
)

// DefaultRuntimeClasses are the RuntimeClass names of each isolation:
// the names deploy/kubernetes/runtimeclasses.yaml gives them, GKE Sandbox's
// "gvisor", and kata-deploy's "kata". runc has none: the node's default.
var DefaultRuntimeClasses = map[string]string{
	sandbox.IsolationGVisor: "gvisor",
	sandbox.IsolationKata:   "kata",
}

// Options configures the runtime. Zero values mean the defaults above.
type Options struct {
	// Instance names the owning server instance; it labels every pod.
	// Default: the host name.
	Instance string
	// Kubeconfig is the kubeconfig file; "" means $KUBECONFIG, else the
	// in-cluster config when running in a pod, else ~/.kube/config.
	Kubeconfig string
	// Context is the kubeconfig context ("" = its current context).
	Context string
	// RESTConfig, when set, is used instead of loading a kubeconfig
	// (embedders; tests acting as a service account).
	RESTConfig *rest.Config
	// Namespace holds the sandbox pods (default DefaultNamespace). It must
	// exist: deploy/kubernetes creates it with the Role the runtime needs.
	Namespace string
	// Image is used when Spec.Image is empty (default DefaultImage).
	Image string
	// ImagePullPolicy is Always, IfNotPresent (default) or Never (a
	// cluster without a registry, whose images are imported, like the
	// local cluster of `make cluster`).
	ImagePullPolicy corev1.PullPolicy
	// MemoryBytes and CPUs are the limits used when the Spec leaves them
	// at zero.
	MemoryBytes int64
	CPUs        float64
	// RequestMemoryBytes and RequestCPUs are the pod's requests, what the
	// scheduler reserves (each capped at its limit).
	RequestMemoryBytes int64
	RequestCPUs        float64
	// EphemeralBytes limits the pod's node-local disk (default 1 GiB).
	EphemeralBytes int64
	// Network is the network used when Spec.Network is empty (default
	// sandbox.NetworkNone: the pod network, with egress denied by the
	// namespace's NetworkPolicy where the cluster enforces them).
	Network string
	// AllowHostNetwork lets a sandbox have network "host": a hostNetwork
	// pod, which sees the node's interfaces and every service listening
	// on the node. Off by default (a Create asking for it is an error).
	AllowHostNetwork bool
	// UID and GID are who commands run as (default 1000:1000, the image's
	// agent user); never 0.
	UID, GID int64
	// Home is the user's home, a memory-backed volume (default
	// /home/agent).
	Home string
	// TmpfsBytes bounds each of /tmp and home (default 512 MiB); they
	// count against the memory limit.
	TmpfsBytes int64
	// Storage says where workspaces live (default: hostPath).
	Storage Storage
	// RuntimeClasses maps a sandbox's isolation (sandbox.Spec.Isolation)
	// to the RuntimeClass its pod runs under: each entry replaces the
	// default of DefaultRuntimeClasses (gvisor: "gvisor", kata: "kata";
	// runc: none, the node's default handler); an empty name takes the
	// isolation away (a Create asking for it is an error).
	RuntimeClasses map[string]string
	// GracePeriod is the pods' termination grace period (default 1s). A
	// sandbox whose processes could be killed through exec is deleted at
	// once; the grace period applies otherwise, and to reaped pods.
	GracePeriod time.Duration
	// StartTimeout bounds a pod's way from create to running (default
	// 1m): an unschedulable pod fails after it with the scheduler's
	// reason. Errors that waiting cannot mend (an image that is missing
	// or cannot be pulled, a pod that failed) fail at once.
	StartTimeout time.Duration
	// LeaseDuration is how often a runtime that created pods proves to
	// other servers' reapers that it lives (a Lease renewed every third
	// of it; default 30s, at least 1s; negative: no lease). Its pods are
	// reaped by others once the lease is three durations old.
	LeaseDuration time.Duration
	// PoolDir is the parent of the folders through which pooled pods
	// (Prestart) get their workspace and sockets (default DefaultPoolDir).
	// It must lie under a mount with shared propagation that the
	// kubelet's mount namespace receives, on the file system of the
	// bridge's folder (pool.go).
	PoolDir string
	// CallTimeout bounds every single API call (default 15s).
	CallTimeout time.Duration
	// Logger receives reaper reports (default: discard).
	Logger *slog.Logger
}

// Storage says where the runtime finds a workspace for a pod.
type Storage struct {
	// Claim names a PersistentVolumeClaim in the namespace that holds
	// the data root (ReadWriteMany when pods run on several nodes);
	// every workspace is mounted from it with a subPath. "" means
	// hostPath: the workspace's own path on the node, which is only right
	// when the server and the pods share the node's file system (a
	// single-node cluster).
	Claim string
	// ClaimRoot is where this server sees the claim's root (it mounts
	// the same volume, e.g. at the app's data_root): a workspace at
	// ClaimRoot/workspaces/u/c is the claim's subPath workspaces/u/c.
	// Required with Claim.
	ClaimRoot string
}

// Runtime creates Kubernetes sandboxes. It is safe for concurrent use.
type Runtime struct {
	cfg  *rest.Config
	http *http.Client
	api  podAPI
	opts Options
	run  string

	// tracked holds the pods of live sandboxes, which the reaper never
	// touches.
	tracked *tracker
	reaper  *reaper
	pods    *podWatch
	lease   leaseState

	// sweepOnce sweeps the pool slots dead processes left, before the
	// first Prestart; poolProven says a probe mount reached a pod.
	sweepOnce  sync.Once
	poolMu     sync.Mutex
	poolProven bool

	mu     sync.Mutex
	closed bool

	ctx    context.Context
	cancel context.CancelFunc
	wg     sync.WaitGroup
}

var _ sandbox.Runtime = (*Runtime)(nil)

// New loads the client configuration, checks the options, and checks that
// the API server answers and lets these credentials list pods in the
// namespace. An API server that does not answer is an error wrapping
// sandbox.ErrEngineUnavailable; missing rights say which Role is needed.
// New starts nothing in the background: the pod watch starts with the
// first Create, the reaper with StartReaper.
func New(ctx context.Context, opts Options) (*Runtime, error) {
	if err := opts.fill(); err != nil {
		return nil, err
	}
	cfg := opts.RESTConfig
	if cfg == nil {
		var err error
		if cfg, err = loadConfig(opts.Kubeconfig, opts.Context); err != nil {
			return nil, err
		}
	} else {
		cfg = rest.CopyConfig(cfg)
	}
	// client-go's default (5 requests/s, bursts of 10) would queue the
	// execs of a few busy sandboxes.
	if cfg.QPS == 0 {
		cfg.QPS, cfg.Burst = 50, 100
	}
	cfg.UserAgent = "agentbox"
	hc, err := rest.HTTPClientFor(cfg)
	if err != nil {
		return nil, fmt.Errorf("kubernetes: client: %w", err)
	}
	api, err := newPodAPI(cfg, hc, opts.Namespace)
	if err != nil {
		return nil, fmt.Errorf("kubernetes: client: %w", err)
	}
	leases, err := newLeaseAPI(cfg, hc, opts.Namespace)
	if err != nil {
		return nil, fmt.Errorf("kubernetes: client: %w", err)
	}
	r := &Runtime{cfg: cfg, http: hc, api: api, opts: opts, run: sandbox.NewRunID(), tracked: newTracker(), lease: leaseState{api: leases}}
	r.ctx, r.cancel = context.WithCancel(context.Background())
	r.pods = newPodWatch(r)
	r.reaper = &reaper{engine: r, tracked: r.tracked, run: r.run, alive: sandbox.RunAlive, now: time.Now, log: opts.Logger, leases: r.expiredRuns,
		sweep: r.sweepSlots}
	pctx, cancel := context.WithTimeout(ctx, min(opts.CallTimeout, 10*time.Second))
	defer cancel()
	_, err = api.list(pctx, metav1.ListOptions{Limit: 1, LabelSelector: sandbox.LabelProduct + "=" + ProductLabelValue})
	if err != nil {
		r.cancel()
		hc.CloseIdleConnections()
		if ctx.Err() != nil {
			return nil, ctx.Err()
		}
		if apierrors.IsForbidden(err) || apierrors.IsUnauthorized(err) {
			return nil, fmt.Errorf("kubernetes: these credentials may not list pods in namespace %q (apply deploy/kubernetes for the Role the runtime needs): %w", opts.Namespace, err)
		}
		return nil, fmt.Errorf("kubernetes: the API server at %s does not answer (is the cluster up? `make cluster` starts a local one; check KUBECONFIG): %w: %w",
			cfg.Host, sandbox.ErrEngineUnavailable, err)
	}
	return r, nil
}

// fill applies the defaults and checks the options.
func (o *Options) fill() error {
	if o.Instance == "" {
		h, err := os.Hostname()
		if err != nil || h == "" {
			h = "agentbox"
		}
		o.Instance = h
	}
	o.Namespace = cmp.Or(o.Namespace, DefaultNamespace)
	o.Image = cmp.Or(o.Image, DefaultImage)
	o.ImagePullPolicy = cmp.Or(o.ImagePullPolicy, DefaultPullPolicy)
	o.MemoryBytes = cmp.Or(o.MemoryBytes, DefaultMemoryBytes)
	o.CPUs = cmp.Or(o.CPUs, DefaultCPUs)
	o.RequestMemoryBytes = cmp.Or(o.RequestMemoryBytes, DefaultRequestMemoryBytes)
	o.RequestCPUs = cmp.Or(o.RequestCPUs, DefaultRequestCPUs)
	o.EphemeralBytes = cmp.Or(o.EphemeralBytes, DefaultEphemeralBytes)
	o.Network = cmp.Or(o.Network, sandbox.NetworkNone)
	o.UID = cmp.Or(o.UID, DefaultUID)
	o.GID = cmp.Or(o.GID, DefaultGID)
	o.Home = cmp.Or(o.Home, DefaultHome)
	o.TmpfsBytes = cmp.Or(o.TmpfsBytes, DefaultTmpfsSize)
	o.GracePeriod = cmp.Or(o.GracePeriod, DefaultGracePeriod)
	o.StartTimeout = cmp.Or(o.StartTimeout, DefaultStartTimeout)
	o.CallTimeout = cmp.Or(o.CallTimeout, DefaultCallTimeout)
	o.LeaseDuration = cmp.Or(o.LeaseDuration, DefaultLeaseDuration)
	if o.LeaseDuration > 0 && o.LeaseDuration < time.Second {
		return fmt.Errorf("kubernetes: lease duration %s: want at least 1s", o.LeaseDuration)
	}
	if o.Logger == nil {
		o.Logger = slog.New(slog.DiscardHandler)
	}
	var errs []error
	if msgs := validation.IsDNS1123Label(o.Namespace); len(msgs) > 0 {
		errs = append(errs, fmt.Errorf("namespace %q: %s", o.Namespace, strings.Join(msgs, "; ")))
	}
	switch o.ImagePullPolicy {
	case corev1.PullAlways, corev1.PullIfNotPresent, corev1.PullNever:
	default:
		errs = append(errs, fmt.Errorf("image pull policy %q: want Always, IfNotPresent or Never", o.ImagePullPolicy))
	}
	if o.MemoryBytes < 0 || o.CPUs < 0 || o.RequestMemoryBytes < 0 || o.RequestCPUs < 0 || o.EphemeralBytes < 0 || o.TmpfsBytes < 0 ||
		o.GracePeriod < 0 || o.StartTimeout < 0 || o.CallTimeout < 0 {
		errs = append(errs, errors.New("negative limit or duration"))
	}
	if o.UID < 0 || o.GID < 0 {
		errs = append(errs, fmt.Errorf("user %d:%d: sandboxes never run as root", o.UID, o.GID))
	}
	if o.Network != sandbox.NetworkNone && o.Network != sandbox.NetworkHost {
		errs = append(errs, fmt.Errorf("network %q: want %q or %q", o.Network, sandbox.NetworkNone, sandbox.NetworkHost))
	} else if o.Network == sandbox.NetworkHost && !o.AllowHostNetwork {
		errs = append(errs, errors.New(`default network "host" needs AllowHostNetwork (allow_host_network)`))
	}
	if o.PoolDir != "" && !filepath.IsAbs(o.PoolDir) {
		errs = append(errs, fmt.Errorf("pool dir %q is not an absolute path", o.PoolDir))
	}
	if !strings.HasPrefix(o.Home, "/") {
		errs = append(errs, fmt.Errorf("home %q is not an absolute path", o.Home))
	}
	if err := o.Storage.check(); err != nil {
		errs = append(errs, err)
	}
	classes := maps.Clone(DefaultRuntimeClasses)
	for iso, class := range o.RuntimeClasses {
		if !sandbox.IsIsolation(iso) {
			errs = append(errs, fmt.Errorf("runtime class for isolation %q: want one of %s", iso, strings.Join(sandbox.Isolations(), ", ")))
			continue
		}
		if msgs := validation.IsDNS1123Subdomain(class); class != "" && len(msgs) > 0 {
			errs = append(errs, fmt.Errorf("runtime class %q of isolation %s: %s", class, iso, strings.Join(msgs, "; ")))
		}
		classes[iso] = class
	}
	o.RuntimeClasses = classes
	if err := errors.Join(errs...); err != nil {
		return fmt.Errorf("kubernetes options: %w", err)
	}
	return nil
}

// loadConfig loads the client configuration the way kubectl does: the
// explicit file, else $KUBECONFIG, else ~/.kube/config, and the in-cluster
// service account when none of them exists.
func loadConfig(path, context string) (*rest.Config, error) {
	rules := clientcmd.NewDefaultClientConfigLoadingRules()
	rules.ExplicitPath = path
	cc := clientcmd.NewNonInteractiveDeferredLoadingClientConfig(rules, &clientcmd.ConfigOverrides{CurrentContext: context})
	cfg, err := cc.ClientConfig()
	if err != nil {
		if clientcmd.IsEmptyConfig(err) {
			return nil, fmt.Errorf("kubernetes: no cluster configured (set KUBECONFIG, the runtime's kubeconfig, or run inside a pod): %w: %w", sandbox.ErrEngineUnavailable, err)
		}
		return nil, fmt.Errorf("kubernetes: client configuration: %w", err)
	}
	return cfg, nil
}

// Name returns "kubernetes".
func (r *Runtime) Name() string { return Name }

// Instance returns the instance name labelling this runtime's pods.
func (r *Runtime) Instance() string { return r.opts.Instance }

// Namespace returns the namespace of this runtime's pods.
func (r *Runtime) Namespace() string { return r.opts.Namespace }

// RunID returns the run id this runtime labels its pods with.
func (r *Runtime) RunID() string { return r.run }

// Close stops the pod watch and the reaper and closes idle connections.
// Sandboxes still alive are not
// removed: their owners remove them, or the reaper of the next run does.
// Idempotent.
func (r *Runtime) Close(ctx context.Context) error {
	r.mu.Lock()
	if r.closed {
		r.mu.Unlock()
		return nil
	}
	r.closed = true
	r.mu.Unlock()
	r.cancel()
	done := make(chan struct{})
	go func() { r.wg.Wait(); close(done) }()
	defer r.http.CloseIdleConnections()
	select {
	case <-done:
		r.stopLease(ctx)
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

// call gives one API call its own timeout.
func (r *Runtime) call(ctx context.Context) (context.Context, context.CancelFunc) {
	return context.WithTimeout(ctx, r.opts.CallTimeout)
}

// apiErr wraps an API call's error with op: an API server that does not
// answer (connection refused, the call's own timeout, 5xx) is marked
// sandbox.ErrEngineUnavailable, a missing object sandbox.ErrNotFound; the
// caller's own cancellation stays as is.
func (r *Runtime) apiErr(parent context.Context, op string, err error) error {
	switch {
	case err == nil:
		return nil
	case parent.Err() != nil:
		return fmt.Errorf("kubernetes %s: %w", op, parent.Err())
	case apierrors.IsNotFound(err):
		return fmt.Errorf("kubernetes %s: %w: %w", op, sandbox.ErrNotFound, err)
	case apierrors.IsForbidden(err) || apierrors.IsUnauthorized(err) || apierrors.IsInvalid(err) || apierrors.IsBadRequest(err) ||
		apierrors.IsAlreadyExists(err) || apierrors.IsConflict(err):
		return fmt.Errorf("kubernetes %s: %w", op, err)
	case errors.Is(err, context.DeadlineExceeded) || apierrors.IsTimeout(err) || apierrors.IsServerTimeout(err) ||
		apierrors.IsServiceUnavailable(err) || apierrors.IsInternalError(err) || apierrors.IsTooManyRequests(err) || isConnErr(err):
		return fmt.Errorf("kubernetes %s: the API server does not answer: %w: %w", op, sandbox.ErrEngineUnavailable, err)
	}
	return fmt.Errorf("kubernetes %s: %w", op, err)
}

func isConnErr(err error) bool {
	s := err.Error()
	return strings.Contains(s, "connection refused") || strings.Contains(s, "connection reset") ||
		strings.Contains(s, "broken pipe") || strings.Contains(s, "no route to host") || strings.Contains(s, "i/o timeout")
}
