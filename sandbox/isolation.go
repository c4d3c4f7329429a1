package sandbox

import (
	"fmt"
	"slices"
	"strings"
)

// Isolation levels a sandbox may ask for (Spec.Isolation): what stands
// between the agent's code and the host's kernel. docs/isolation.md has
// the threat model of each and what it costs.
const (
	// IsolationRunc is a hardened container on the host's kernel (the
	// default): namespaces, cgroups, no capabilities, seccomp. One kernel
	// bug reachable through the allowed system calls is a host escape.
	IsolationRunc = "runc"
	// IsolationGVisor is gVisor's user-space kernel (runsc): the agent's
	// system calls are served by gVisor's Sentry, which itself uses a
	// small, filtered set of the host's.
	IsolationGVisor = "gvisor"
	// IsolationKata is a lightweight virtual machine per sandbox (Kata
	// Containers): a guest kernel behind a hypervisor. Kubernetes only,
	// through a RuntimeClass.
	IsolationKata = "kata"
)

// isolations are the known levels, sorted.
var isolations = []string{IsolationGVisor, IsolationKata, IsolationRunc}

// Isolations lists the isolation levels, sorted.
func Isolations() []string { return slices.Clone(isolations) }

// IsIsolation reports whether s names an isolation level ("" does not).
func IsIsolation(s string) bool { return slices.Contains(isolations, s) }

// CheckIsolation returns the isolation spec asks for ("" is IsolationRunc)
// when it is one the runtime called runtime offers, and otherwise an error
// wrapping ErrIsolation that names what the runtime offers. A runtime
// never gives a weaker isolation than the one asked for.
func CheckIsolation(runtime, isolation string, offered ...string) (string, error) {
	if isolation == "" {
		isolation = IsolationRunc
	}
	if !IsIsolation(isolation) {
		return "", fmt.Errorf("isolation %q: want one of %s: %w", isolation, strings.Join(isolations, ", "), ErrIsolation)
	}
	if !slices.Contains(offered, isolation) {
		return "", fmt.Errorf("isolation %q is not available on the %s runtime (it offers %s): %w", isolation, runtime, strings.Join(offered, ", "), ErrIsolation)
	}
	return isolation, nil
}
