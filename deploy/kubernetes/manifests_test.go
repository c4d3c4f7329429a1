package manifests_test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"os/exec"
	"path"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	authzv1 "k8s.io/api/authorization/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	utilyaml "k8s.io/apimachinery/pkg/util/yaml"
	authzclient "k8s.io/client-go/kubernetes/typed/authorization/v1"
	"sigs.k8s.io/yaml"

	manifests "github.com/agentbox/agentbox/deploy/kubernetes"
	"github.com/agentbox/agentbox/internal/testenv"
	"github.com/agentbox/agentbox/sandbox/kubernetes/k8stest"
)

// TestKustomization: each kustomization.yaml (deploy/kubernetes and its
// runtimeclasses/) lists every manifest beside it, so `kubectl apply -k`
// applies what Apply does.
func TestKustomization(t *testing.T) {
	for _, dir := range []string{".", "runtimeclasses"} {
		b, err := manifests.Files.ReadFile(path.Join(dir, "kustomization.yaml"))
		if err != nil {
			t.Fatal(err)
		}
		var k struct{ Resources []string }
		if err := yaml.Unmarshal(b, &k); err != nil {
			t.Fatal(err)
		}
		ents, err := manifests.Files.ReadDir(dir)
		if err != nil {
			t.Fatal(err)
		}
		var files []string
		for _, e := range ents {
			if n := e.Name(); strings.HasSuffix(n, ".yaml") && n != "kustomization.yaml" {
				files = append(files, n)
			}
		}
		slices.Sort(k.Resources)
		if !slices.Equal(k.Resources, files) {
			t.Errorf("%s: kustomization resources = %v, files = %v", dir, k.Resources, files)
		}
	}
	objs, err := manifests.Objects()
	if err != nil {
		t.Fatal(err)
	}
	if len(objs) == 0 || objs[0].GetKind() != "Namespace" {
		t.Errorf("objects do not start with the namespaces: %d objects", len(objs))
	}
	rcs, err := manifests.RuntimeClasses()
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, o := range rcs {
		handler, _, _ := unstructured.NestedString(o.Object, "handler")
		names = append(names, o.GetKind()+" "+o.GetName()+" "+handler)
	}
	if want := []string{"RuntimeClass gvisor runsc", "RuntimeClass kata kata-qemu"}; !slices.Equal(names, want) {
		t.Errorf("runtime classes %v, want %v", names, want)
	}
}

// TestRuntimeClassesDryRun: the API server admits the RuntimeClasses (a
// server-side dry run on the local cluster).
func TestRuntimeClassesDryRun(t *testing.T) {
	cfg := k8stest.Admin(t)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	objs, err := manifests.RuntimeClasses()
	if err != nil {
		t.Fatal(err)
	}
	got, err := manifests.Apply(ctx, cfg, objs, true)
	if err != nil {
		t.Fatal(err)
	}
	if want := []string{"RuntimeClass gvisor", "RuntimeClass kata"}; !slices.Equal(got, want) {
		t.Errorf("applied %v, want %v", got, want)
	}
}

// TestServerSideDryRun applies every manifest with a server-side dry run
// on the local cluster: the API server validates and admits them without
// storing anything. The namespaces exist (a dry run of an object needs its
// namespace): the single-node variant's, which the tests' sandboxes use.
func TestServerSideDryRun(t *testing.T) {
	cfg := k8stest.Admin(t)
	k8stest.ServiceAccount(t)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	objs, err := manifests.Objects()
	if err != nil {
		t.Fatal(err)
	}
	got, err := manifests.Apply(ctx, cfg, objs, true)
	if err != nil {
		t.Fatal(err)
	}
	want := []string{
		"Namespace agentbox", "Namespace agentbox-sandboxes",
		"NetworkPolicy agentbox-sandboxes/default-deny", "NetworkPolicy agentbox-sandboxes/allow-bridge", "NetworkPolicy agentbox/agentbox-server",
		"Deployment agentbox/agentbox", "Service agentbox/agentbox",
		"PersistentVolumeClaim agentbox/agentbox-data", "PersistentVolumeClaim agentbox-sandboxes/agentbox-workspaces",
		"ServiceAccount agentbox/agentbox", "Role agentbox-sandboxes/agentbox-sandboxes", "RoleBinding agentbox-sandboxes/agentbox-sandboxes",
		"ValidatingAdmissionPolicy agentbox-sandbox-pods", "ValidatingAdmissionPolicyBinding agentbox-sandbox-pods",
	}
	slices.Sort(got)
	slices.Sort(want)
	if !slices.Equal(got, want) {
		t.Errorf("applied %v, want %v", got, want)
	}
}

// TestSingleNode: SingleNode is what `kubectl apply -k
// deploy/kubernetes-single-node` applies: the same objects, the sandbox
// namespace's labels included.
func TestSingleNode(t *testing.T) {
	kubectl := testenv.ClusterKubectl(t)
	out, err := exec.Command(kubectl, "kustomize", filepath.Join("..", "kubernetes-single-node")).Output()
	if err != nil {
		t.Fatalf("kubectl kustomize: %v", err)
	}
	describe := func(objs []*unstructured.Unstructured) []string {
		var d []string
		for _, o := range objs {
			s := o.GetKind() + " " + path.Join(o.GetNamespace(), o.GetName())
			if o.GetKind() == "Namespace" {
				s += fmt.Sprint(" ", o.GetLabels())
			}
			d = append(d, s)
		}
		slices.Sort(d)
		return d
	}
	var want []*unstructured.Unstructured
	dec := utilyaml.NewYAMLOrJSONDecoder(bytes.NewReader(out), 4096)
	for {
		var m map[string]any
		if err := dec.Decode(&m); errors.Is(err, io.EOF) {
			break
		} else if err != nil {
			t.Fatal(err)
		}
		want = append(want, &unstructured.Unstructured{Object: m})
	}
	objs, err := manifests.Objects()
	if err != nil {
		t.Fatal(err)
	}
	if got, want := describe(manifests.SingleNode(objs)), describe(want); !slices.Equal(got, want) {
		t.Errorf("SingleNode:\n%s\nkubectl kustomize deploy/kubernetes-single-node:\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
}

// TestRole: the service account may manage and exec into pods in the
// sandbox namespace, and nothing else.
func TestRole(t *testing.T) {
	sa := k8stest.ServiceAccount(t)
	az, err := authzclient.NewForConfig(sa)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	for _, c := range []struct {
		ns, verb, resource, sub string
		want                    bool
	}{
		{manifests.SandboxNamespace, "create", "pods", "", true},
		{manifests.SandboxNamespace, "delete", "pods", "", true},
		{manifests.SandboxNamespace, "watch", "pods", "", true},
		{manifests.SandboxNamespace, "create", "pods", "exec", true},
		{manifests.SandboxNamespace, "get", "pods", "log", true},
		{manifests.SandboxNamespace, "list", "events", "", true},
		{manifests.SandboxNamespace, "update", "leases", "", true},
		{manifests.SandboxNamespace, "update", "pods", "", false},
		{manifests.SandboxNamespace, "get", "secrets", "", false},
		{manifests.SandboxNamespace, "create", "networkpolicies", "", false},
		{manifests.SandboxNamespace, "create", "pods", "ephemeralcontainers", false},
		{manifests.ServerNamespace, "list", "pods", "", false},
		{manifests.ServerNamespace, "update", "leases", "", false},
		{"default", "create", "pods", "", false},
		{"kube-system", "get", "secrets", "", false},
	} {
		r, err := az.SelfSubjectAccessReviews().Create(ctx, &authzv1.SelfSubjectAccessReview{Spec: authzv1.SelfSubjectAccessReviewSpec{
			ResourceAttributes: &authzv1.ResourceAttributes{Namespace: c.ns, Verb: c.verb, Group: group(c.resource), Resource: c.resource, Subresource: c.sub}}}, metav1.CreateOptions{})
		if err != nil {
			t.Fatal(err)
		}
		if r.Status.Allowed != c.want {
			t.Errorf("%s %s/%s in %s: allowed = %v, want %v", c.verb, c.resource, c.sub, c.ns, r.Status.Allowed, c.want)
		}
	}
}

// group is the API group of a resource the tests ask about.
func group(resource string) string {
	if resource == "leases" {
		return "coordination.k8s.io"
	}
	return ""
}
