// Package manifests holds the Kubernetes manifests agentbox needs on a
// cluster (the YAML files beside this one, `kubectl apply -k
// deploy/kubernetes`) and applies them with server-side apply: the
// namespaces (the sandbox namespace enforcing the restricted Pod Security
// profile), the server's ServiceAccount with a Role limited to the
// sandbox namespace's pods, the ValidatingAdmissionPolicy that holds
// sandbox pods to their shape, and the NetworkPolicy that denies sandbox
// pods every connection. SingleNode is deploy/kubernetes-single-node, the
// variant for a server on the one node of its cluster with hostPath
// workspaces or host network.
package manifests

import (
	"bytes"
	"context"
	"embed"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"path"
	"sort"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/types"
	utilyaml "k8s.io/apimachinery/pkg/util/yaml"
	"k8s.io/client-go/discovery"
	"k8s.io/client-go/discovery/cached/memory"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/restmapper"
)

// Files are the manifests, one kind of concern per file, and in
// runtimeclasses/ the RuntimeClasses of the sandbox isolations, applied
// apart (kubectl apply -k deploy/kubernetes/runtimeclasses).
//
//go:embed *.yaml runtimeclasses/*.yaml
var Files embed.FS

// Namespaces the manifests create.
const (
	ServerNamespace  = "agentbox"
	SandboxNamespace = "agentbox-sandboxes"
	// ServiceAccount is the server's service account, in
	// ServerNamespace.
	ServiceAccount = "agentbox"
)

// Objects decodes every manifest (kustomization.yaml aside) into objects,
// in the order kubectl would apply them: files sorted, documents in file
// order, namespaces first.
func Objects() ([]*unstructured.Unstructured, error) {
	out, err := decode("*.yaml")
	if err != nil {
		return nil, err
	}
	sort.SliceStable(out, func(i, j int) bool { return out[i].GetKind() == "Namespace" && out[j].GetKind() != "Namespace" })
	return out, nil
}

// RuntimeClasses decodes the RuntimeClasses of runtimeclasses/: gvisor
// (handler runsc) and kata (handler kata-qemu).
func RuntimeClasses() ([]*unstructured.Unstructured, error) {
	return decode("runtimeclasses/*.yaml")
}

// decode decodes the manifests matching pattern (kustomization.yaml
// aside), files sorted, documents in file order.
func decode(pattern string) ([]*unstructured.Unstructured, error) {
	names, err := fs.Glob(Files, pattern)
	if err != nil {
		return nil, err
	}
	sort.Strings(names)
	var out []*unstructured.Unstructured
	for _, name := range names {
		if path.Base(name) == "kustomization.yaml" {
			continue
		}
		b, err := Files.ReadFile(name)
		if err != nil {
			return nil, err
		}
		dec := utilyaml.NewYAMLOrJSONDecoder(bytes.NewReader(b), 4096)
		for i := 0; ; i++ {
			var m map[string]any
			if err := dec.Decode(&m); errors.Is(err, io.EOF) {
				break
			} else if err != nil {
				return nil, fmt.Errorf("%s: document %d: %w", name, i+1, err)
			}
			if len(m) == 0 {
				continue
			}
			u := &unstructured.Unstructured{Object: m}
			if u.GetKind() == "" || u.GetAPIVersion() == "" || u.GetName() == "" {
				return nil, fmt.Errorf("%s: document %d: kind, apiVersion and metadata.name are required", name, i+1)
			}
			out = append(out, u)
		}
	}
	return out, nil
}

// Pod Security labels of the sandbox namespace.
const (
	labelEnforce = "pod-security.kubernetes.io/enforce"
	labelWarn    = "pod-security.kubernetes.io/warn"
)

// SingleNode turns Objects into deploy/kubernetes-single-node: the sandbox
// side alone (the server's Deployment, Service and claims left out: the
// server runs on the node) with a sandbox namespace whose Pod Security
// admission enforces nothing, as hostPath volumes (workspaces, the
// bridge's sockets) and host network need; the ValidatingAdmissionPolicy
// still holds its pods to their shape. objs are changed in place.
func SingleNode(objs []*unstructured.Unstructured) []*unstructured.Unstructured {
	var out []*unstructured.Unstructured
	for _, o := range objs {
		switch o.GetKind() {
		case "Deployment", "Service", "PersistentVolumeClaim":
			continue
		case "Namespace":
			if o.GetName() == SandboxNamespace {
				labels := o.GetLabels()
				labels[labelEnforce], labels[labelWarn] = "privileged", "privileged"
				o.SetLabels(labels)
			}
		}
		out = append(out, o)
	}
	return out
}

// Apply applies objs (Objects, or some of them) to the cluster of cfg with
// server-side apply (field manager "agentbox"); with dryRun the API server
// checks and admits them (schema, references, admission) without storing
// anything, and a namespaced object then needs its namespace to exist. It
// returns the objects as the API server answered, "Kind namespace/name"
// each, in order.
func Apply(ctx context.Context, cfg *rest.Config, objs []*unstructured.Unstructured, dryRun bool) ([]string, error) {
	dc, err := discovery.NewDiscoveryClientForConfig(cfg)
	if err != nil {
		return nil, fmt.Errorf("discovery: %w", err)
	}
	mapper := restmapper.NewDeferredDiscoveryRESTMapper(memory.NewMemCacheClient(dc))
	dyn, err := dynamic.NewForConfig(cfg)
	if err != nil {
		return nil, fmt.Errorf("dynamic client: %w", err)
	}
	opts := metav1.PatchOptions{FieldManager: "agentbox", Force: ptr(true)}
	if dryRun {
		opts.DryRun = []string{metav1.DryRunAll}
	}
	var done []string
	for _, u := range objs {
		gvk := u.GroupVersionKind()
		m, err := mapper.RESTMapping(gvk.GroupKind(), gvk.Version)
		if err != nil {
			return done, fmt.Errorf("%s %s: %w", gvk.Kind, u.GetName(), err)
		}
		body, err := u.MarshalJSON()
		if err != nil {
			return done, err
		}
		var ri dynamic.ResourceInterface = dyn.Resource(m.Resource)
		if m.Scope.Name() == "namespace" {
			ri = dyn.Resource(m.Resource).Namespace(u.GetNamespace())
		}
		got, err := ri.Patch(ctx, u.GetName(), types.ApplyPatchType, body, opts)
		if err != nil {
			return done, fmt.Errorf("apply %s %s: %w", gvk.Kind, path.Join(u.GetNamespace(), u.GetName()), err)
		}
		done = append(done, got.GetKind()+" "+path.Join(got.GetNamespace(), got.GetName()))
	}
	return done, nil
}

func ptr[T any](v T) *T { return &v }
