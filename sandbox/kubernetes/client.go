package kubernetes

import (
	"context"
	"net/http"
	"net/url"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/serializer"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/rest"
)

// The runtime talks to the API server through a REST client of its own
// that knows the core/v1 types alone: client-go's typed clientset would
// register every API group and add ~25 MB to the agentbox binary, which is
// mounted into every sandbox.
var (
	apiScheme  = runtime.NewScheme()
	apiCodecs  = serializer.NewCodecFactory(apiScheme)
	paramCodec = runtime.NewParameterCodec(apiScheme)
)

func init() {
	if err := corev1.AddToScheme(apiScheme); err != nil {
		panic(err)
	}
}

// podAPI is the part of the core/v1 API the runtime uses, in one
// namespace.
type podAPI struct {
	rc *rest.RESTClient
	ns string
}

// newPodAPI makes a core/v1 REST client for cfg over hc.
func newPodAPI(cfg *rest.Config, hc *http.Client, ns string) (podAPI, error) {
	c := rest.CopyConfig(cfg)
	c.APIPath = "/api"
	c.GroupVersion = &corev1.SchemeGroupVersion
	c.NegotiatedSerializer = apiCodecs.WithoutConversion()
	if c.ContentType == "" {
		c.ContentType = runtime.ContentTypeJSON
	}
	rc, err := rest.RESTClientForConfigAndClient(c, hc)
	if err != nil {
		return podAPI{}, err
	}
	return podAPI{rc: rc, ns: ns}, nil
}

func (a podAPI) create(ctx context.Context, pod *corev1.Pod) (*corev1.Pod, error) {
	out := &corev1.Pod{}
	err := a.rc.Post().Namespace(a.ns).Resource("pods").
		VersionedParams(&metav1.CreateOptions{FieldManager: "agentbox"}, paramCodec).
		Body(pod).Do(ctx).Into(out)
	return out, err
}

func (a podAPI) get(ctx context.Context, name string) (*corev1.Pod, error) {
	out := &corev1.Pod{}
	err := a.rc.Get().Namespace(a.ns).Resource("pods").Name(name).Do(ctx).Into(out)
	return out, err
}

func (a podAPI) list(ctx context.Context, opts metav1.ListOptions) (*corev1.PodList, error) {
	out := &corev1.PodList{}
	err := a.rc.Get().Namespace(a.ns).Resource("pods").VersionedParams(&opts, paramCodec).Do(ctx).Into(out)
	return out, err
}

func (a podAPI) watch(ctx context.Context, opts metav1.ListOptions) (watch.Interface, error) {
	opts.Watch = true
	return a.rc.Get().Namespace(a.ns).Resource("pods").VersionedParams(&opts, paramCodec).Watch(ctx)
}

func (a podAPI) patch(ctx context.Context, name string, pt types.PatchType, data []byte) (*corev1.Pod, error) {
	out := &corev1.Pod{}
	err := a.rc.Patch(pt).Namespace(a.ns).Resource("pods").Name(name).
		VersionedParams(&metav1.PatchOptions{FieldManager: "agentbox"}, paramCodec).
		Body(data).Do(ctx).Into(out)
	return out, err
}

func (a podAPI) delete(ctx context.Context, name string, opts metav1.DeleteOptions) error {
	return a.rc.Delete().Namespace(a.ns).Resource("pods").Name(name).Body(&opts).Do(ctx).Error()
}

func (a podAPI) events(ctx context.Context, fieldSelector string) (*corev1.EventList, error) {
	out := &corev1.EventList{}
	err := a.rc.Get().Namespace(a.ns).Resource("events").
		VersionedParams(&metav1.ListOptions{FieldSelector: fieldSelector}, paramCodec).Do(ctx).Into(out)
	return out, err
}

// execURL is the URL of an exec in pod.
func (a podAPI) execURL(pod string, opts *corev1.PodExecOptions) *url.URL {
	return a.rc.Post().Namespace(a.ns).Resource("pods").Name(pod).SubResource("exec").VersionedParams(opts, paramCodec).URL()
}
