package kubernetes

import (
	"context"
	"errors"
	"fmt"
	"io"
	"sort"
	"strings"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/tools/cache"

	"github.com/agentbox/agentbox/sandbox"
)

// podWatch keeps the runtime's own pods (its run's label) in an informer
// cache, so waiting for a pod to run costs no request of its own: one
// list and one watch per runtime, however many sandboxes it creates. It
// starts with the first Create and stops with the runtime.
type podWatch struct {
	r *Runtime

	once     sync.Once
	inf      cache.SharedIndexInformer
	synced   chan struct{}
	startErr error

	mu      sync.Mutex
	waiters map[string]map[chan struct{}]struct{}
	// gone holds the tracked pods deleted while their sandbox lives
	// (behind the runtime's back, or being removed).
	gone    map[string]bool
	lastErr error // the watch's last error, for messages
}

func newPodWatch(r *Runtime) *podWatch {
	return &podWatch{r: r, synced: make(chan struct{}), waiters: map[string]map[chan struct{}]struct{}{},
		gone: map[string]bool{}}
}

// start starts the informer once and waits (bounded by ctx) for its
// first list.
func (w *podWatch) start(ctx context.Context) error {
	w.once.Do(func() {
		r := w.r
		ns, sel := r.opts.Namespace, r.ownSelector()
		lw := &cache.ListWatch{
			ListWithContextFunc: func(ctx context.Context, o metav1.ListOptions) (runtime.Object, error) {
				o.LabelSelector = sel
				return r.api.list(ctx, o)
			},
			WatchFuncWithContext: func(ctx context.Context, o metav1.ListOptions) (watch.Interface, error) {
				o.LabelSelector = sel
				return r.api.watch(ctx, o)
			},
		}
		w.inf = cache.NewSharedIndexInformer(lw, &corev1.Pod{}, 0, cache.Indexers{})
		_ = w.inf.SetWatchErrorHandler(func(_ *cache.Reflector, err error) {
			// A watch that ends or expires is routine: the informer
			// lists and watches again.
			if errors.Is(err, io.EOF) || apierrors.IsResourceExpired(err) || apierrors.IsGone(err) {
				return
			}
			w.mu.Lock()
			w.lastErr = err
			w.mu.Unlock()
			if r.ctx.Err() == nil {
				r.opts.Logger.Warn("kubernetes pod watch", "namespace", ns, "error", err)
			}
		})
		_, w.startErr = w.inf.AddEventHandler(cache.ResourceEventHandlerFuncs{
			AddFunc:    func(obj any) { w.changed(obj, false) },
			UpdateFunc: func(_, obj any) { w.changed(obj, false) },
			DeleteFunc: func(obj any) { w.changed(obj, true) },
		})
		if w.startErr != nil {
			return
		}
		r.wg.Add(2)
		go func() {
			defer r.wg.Done()
			w.inf.Run(r.ctx.Done())
		}()
		go func() {
			defer r.wg.Done()
			if cache.WaitForCacheSync(r.ctx.Done(), w.inf.HasSynced) {
				close(w.synced)
			}
		}()
	})
	if w.startErr != nil {
		return fmt.Errorf("kubernetes pod watch: %w", w.startErr)
	}
	select {
	case <-w.synced:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	case <-w.r.ctx.Done():
		return fmt.Errorf("kubernetes create: runtime closed: %w", sandbox.ErrEngineUnavailable)
	case <-time.After(w.r.opts.CallTimeout):
		return fmt.Errorf("kubernetes pod watch: no list of pods after %s (%v): %w", w.r.opts.CallTimeout, w.err(), sandbox.ErrEngineUnavailable)
	}
}

func (w *podWatch) err() error {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.lastErr == nil {
		return errors.New("no error reported")
	}
	return w.lastErr
}

// changed records an event about obj and wakes whoever waits for it.
func (w *podWatch) changed(obj any, deleted bool) {
	if t, ok := obj.(cache.DeletedFinalStateUnknown); ok {
		obj = t.Obj
	}
	pod, ok := obj.(*corev1.Pod)
	if !ok {
		return
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	if deleted && w.r.tracked.has(pod.Name) {
		w.gone[pod.Name] = true
	}
	for ch := range w.waiters[pod.Name] {
		select {
		case ch <- struct{}{}:
		default:
		}
	}
}

// forget drops what the watch remembers of a pod that was removed and is
// no longer tracked.
func (w *podWatch) forget(name string) {
	w.mu.Lock()
	delete(w.gone, name)
	w.mu.Unlock()
}

// isGone reports whether the tracked pod was deleted.
func (w *podWatch) isGone(name string) bool {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.gone[name]
}

// get returns the cached pod.
func (w *podWatch) get(name string) *corev1.Pod {
	if w.inf == nil {
		return nil
	}
	obj, ok, err := w.inf.GetStore().GetByKey(w.r.opts.Namespace + "/" + name)
	if err != nil || !ok {
		return nil
	}
	pod, _ := obj.(*corev1.Pod)
	return pod
}

func (w *podWatch) subscribe(name string) (chan struct{}, func()) {
	ch := make(chan struct{}, 1)
	w.mu.Lock()
	if w.waiters[name] == nil {
		w.waiters[name] = map[chan struct{}]struct{}{}
	}
	w.waiters[name][ch] = struct{}{}
	w.mu.Unlock()
	return ch, func() {
		w.mu.Lock()
		delete(w.waiters[name], ch)
		if len(w.waiters[name]) == 0 {
			delete(w.waiters, name)
		}
		w.mu.Unlock()
	}
}

// waitRunning waits until the pod's sandbox container runs. It fails at
// once when the pod cannot start (podProblem), when a volume cannot be
// mounted (mountProblem, looked for every 2 s once the pod is on a node
// and not yet running), when it is deleted, and after
// Options.StartTimeout with the last state seen (the scheduler's reason
// for an unschedulable pod).
func (w *podWatch) waitRunning(ctx context.Context, name string) error {
	ch, unsubscribe := w.subscribe(name)
	defer unsubscribe()
	timer := time.NewTimer(w.r.opts.StartTimeout)
	defer timer.Stop()
	poll := time.NewTicker(2 * time.Second)
	defer poll.Stop()
	var last *corev1.Pod
	for {
		if pod := w.get(name); pod != nil {
			last = pod
			if running(pod) {
				return nil
			}
			if err := podProblem(pod); err != nil {
				return err
			}
		} else if w.isGone(name) {
			return fmt.Errorf("the pod was deleted before it ran: %w", sandbox.ErrRemoved)
		}
		select {
		case <-ch:
		case <-poll.C:
			if last != nil && last.Spec.NodeName != "" {
				if err := w.r.mountProblem(ctx, name, last.Spec.NodeName); err != nil {
					return err
				}
			}
		case <-ctx.Done():
			return ctx.Err()
		case <-w.r.ctx.Done():
			return fmt.Errorf("runtime closed: %w", sandbox.ErrEngineUnavailable)
		case <-timer.C:
			if last == nil {
				return fmt.Errorf("not seen running after %s (%v)", w.r.opts.StartTimeout, w.err())
			}
			return fmt.Errorf("not running after %s: %s%s", w.r.opts.StartTimeout, podState(last), w.r.podEvents(name))
		}
	}
}

// running reports whether the pod's sandbox container runs.
func running(pod *corev1.Pod) bool {
	if pod.Status.Phase != corev1.PodRunning || pod.DeletionTimestamp != nil {
		return false
	}
	for _, st := range pod.Status.ContainerStatuses {
		if st.Name == containerName {
			return st.State.Running != nil
		}
	}
	return false
}

// fatalWaiting are the container waiting reasons that waiting does not
// mend: the kubelet retries pulls with a growing back-off, but an image
// that failed once is a configuration error for a sandbox that a request
// waits on.
var fatalWaiting = map[string]string{
	"ErrImageNeverPull":          "the image is not on the node and the pull policy is Never (import it, e.g. `make cluster` does, or set image_pull_policy)",
	"ErrImagePull":               "the image cannot be pulled",
	"ImagePullBackOff":           "the image cannot be pulled",
	"InvalidImageName":           "the image name is invalid",
	"CreateContainerConfigError": "the container's configuration is invalid",
	"CreateContainerError":       "the container cannot be created",
	"RunContainerError":          "the container cannot be started",
	"CrashLoopBackOff":           "the container keeps exiting",
}

// podProblem is the error of a pod that will not run: it ended, its
// container waits for a reason in fatalWaiting, or the scheduler cannot
// place it for want of a PersistentVolumeClaim that does not exist.
func podProblem(pod *corev1.Pod) error {
	if pod.Status.Phase == corev1.PodFailed || pod.Status.Phase == corev1.PodSucceeded {
		return fmt.Errorf("the pod ended before it ran: %s", podState(pod))
	}
	for _, c := range pod.Status.Conditions {
		if c.Type == corev1.PodScheduled && c.Status == corev1.ConditionFalse &&
			strings.Contains(c.Message, "persistentvolumeclaim") && strings.Contains(c.Message, "not found") {
			return fmt.Errorf("the workspace claim does not exist in the namespace (create it, or set workspace_claim to one that does): %s", c.Message)
		}
	}
	for _, st := range pod.Status.ContainerStatuses {
		if w := st.State.Waiting; w != nil {
			if what, ok := fatalWaiting[w.Reason]; ok {
				return fmt.Errorf("%s: image %q: %s: %s", what, st.Image, w.Reason, w.Message)
			}
		}
		if t := st.State.Terminated; t != nil {
			return fmt.Errorf("the sandbox container exited before it ran: %s", podState(pod))
		}
	}
	return nil
}

// podState summarises why a pod is not running, for messages.
func podState(p *corev1.Pod) string {
	s := "phase " + string(p.Status.Phase)
	if p.Status.Reason != "" || p.Status.Message != "" {
		s += fmt.Sprintf(" (%s %s)", p.Status.Reason, p.Status.Message)
	}
	for _, c := range p.Status.Conditions {
		if c.Type == corev1.PodScheduled && c.Status != corev1.ConditionTrue {
			s += fmt.Sprintf("; not scheduled: %s: %s", c.Reason, c.Message)
		}
	}
	for _, st := range p.Status.ContainerStatuses {
		if w := st.State.Waiting; w != nil {
			s += fmt.Sprintf("; %s waiting: %s %s", st.Name, w.Reason, w.Message)
		}
		if t := st.State.Terminated; t != nil {
			s += fmt.Sprintf("; %s terminated: %s, exit %d %s", st.Name, t.Reason, t.ExitCode, t.Message)
		}
	}
	return s
}

// mountProblem is the error of a pod whose volume the kubelet cannot
// mount in a way that waiting does not mend: a hostPath that is not on
// the node (hostPath storage with the server on another node) or is not
// what the server saw. It reads the pod's events; nil when they hold no
// such failure or cannot be read.
func (r *Runtime) mountProblem(ctx context.Context, name, node string) error {
	ectx, cancel := context.WithTimeout(ctx, min(r.opts.CallTimeout, 5*time.Second))
	defer cancel()
	list, err := r.api.events(ectx, "involvedObject.kind=Pod,involvedObject.name="+name+",reason=FailedMount")
	if err != nil {
		return nil
	}
	for _, e := range list.Items {
		if strings.Contains(e.Message, "hostPath type check failed") {
			return fmt.Errorf("node %s cannot mount a hostPath volume: %s (hostPath storage needs the server's files on the pod's node: run the server on it, or use workspace_claim)", node, e.Message)
		}
	}
	return nil
}

// podEvents lists the pod's recent warning events ("; events: ..."), or
// nothing when they cannot be read (the Role may not allow it): a volume
// that fails to mount shows only there.
func (r *Runtime) podEvents(name string) string {
	ctx, cancel := context.WithTimeout(context.Background(), min(r.opts.CallTimeout, 5*time.Second))
	defer cancel()
	list, err := r.api.events(ctx, "involvedObject.kind=Pod,involvedObject.name="+name)
	if err != nil || len(list.Items) == 0 {
		return ""
	}
	sort.Slice(list.Items, func(i, j int) bool { return list.Items[i].LastTimestamp.Before(&list.Items[j].LastTimestamp) })
	var msgs []string
	for _, e := range list.Items {
		if e.Type == corev1.EventTypeWarning {
			msgs = append(msgs, e.Reason+": "+e.Message)
		}
	}
	if len(msgs) == 0 {
		return ""
	}
	return "; events: " + strings.Join(msgs[max(0, len(msgs)-3):], "; ")
}
