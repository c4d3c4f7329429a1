package testenv

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"
)

// ClusterNode is the name of the local cluster's only node.
const ClusterNode = "localhost"

var (
	clusterOnce sync.Once
	clusterPath string
	clusterErr  error
)

// Cluster requires the local single-node Kubernetes cluster (`make
// cluster`) and returns the path of its admin kubeconfig:
// AGENTBOX_KUBECONFIG when set (the Makefile sets it), else
// .cache/cluster/kubeconfig under the repository. The cluster counts as up
// when its API server answers /readyz and its node is Ready; the check runs
// once per test binary.
//
// Cluster never starts the cluster itself: starting it needs root, may
// build Kubernetes (minutes when the caches are cold) and leaves daemons
// running, which `make test` (starts and stops it) and `make cluster` /
// `make cluster-down` own. When it is not up, t is skipped, or failed
// under CI=true.
func Cluster(t testing.TB) string {
	t.Helper()
	clusterOnce.Do(func() { clusterPath, clusterErr = findCluster() })
	if clusterErr != nil {
		Missing(t, "the local Kubernetes cluster of `make cluster` ("+clusterErr.Error()+")")
	}
	return clusterPath
}

// ClusterKubectl requires the local cluster and returns the kubectl built
// for it (the version of its API server), which lives beside the
// kubeconfig.
func ClusterKubectl(t testing.TB) string {
	t.Helper()
	return clusterKubectl(Cluster(t))
}

func clusterKubectl(kubeconfig string) string {
	return filepath.Join(filepath.Dir(kubeconfig), "bin", "kubectl")
}

func findCluster() (string, error) {
	kubeconfig := os.Getenv("AGENTBOX_KUBECONFIG")
	if kubeconfig == "" {
		kubeconfig = filepath.Join(RepoRoot(), ".cache", "cluster", "kubeconfig")
	}
	if !fileExists(kubeconfig) {
		return "", fmt.Errorf("no kubeconfig at %s", kubeconfig)
	}
	kubectl := clusterKubectl(kubeconfig)
	if !fileExists(kubectl) {
		return "", fmt.Errorf("no kubectl at %s", kubectl)
	}
	run := func(args ...string) (string, error) {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		out, err := exec.CommandContext(ctx, kubectl, append([]string{"--kubeconfig", kubeconfig}, args...)...).CombinedOutput()
		if err != nil {
			return "", fmt.Errorf("kubectl %s: %v: %s", strings.Join(args, " "), err, strings.TrimSpace(string(out)))
		}
		return strings.TrimSpace(string(out)), nil
	}
	if _, err := run("get", "--raw", "/readyz"); err != nil {
		return "", err
	}
	ready, err := run("get", "node", ClusterNode, "-o", `jsonpath={.status.conditions[?(@.type=="Ready")].status}`)
	if err != nil {
		return "", err
	}
	if ready != "True" {
		return "", fmt.Errorf("node %s is not Ready (Ready=%q)", ClusterNode, ready)
	}
	return kubeconfig, nil
}
