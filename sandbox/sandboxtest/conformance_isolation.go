package sandboxtest

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/agentbox/agentbox/sandbox"
)

// testIsolation: commands meet the kernel the spec's isolation promises,
// seen from inside: the host's for runc, gVisor's Sentry for gvisor (its
// kernel log says so), another kernel than the host's for kata.
func (c *suite) testIsolation(t *testing.T) {
	sb := c.sandbox(t, nil)
	res := sh(t, sb, "uname -r; dmesg 2>/dev/null | head -n 3; true")
	release, log, _ := strings.Cut(res.Stdout, "\n")
	host, err := os.ReadFile("/proc/sys/kernel/osrelease")
	if err != nil {
		t.Fatal(err)
	}
	hostRelease := strings.TrimSpace(string(host))
	gvisor := strings.Contains(log, "gVisor")
	switch iso := cmp.Or(c.f.Isolation, sandbox.IsolationRunc); iso {
	case sandbox.IsolationRunc:
		if gvisor || release != hostRelease {
			t.Errorf("isolation runc: kernel %q (log %q), want the host's %q", release, log, hostRelease)
		}
	case sandbox.IsolationGVisor:
		if !gvisor {
			t.Errorf("isolation gvisor: kernel %q, log %q: want gVisor's", release, log)
		}
	case sandbox.IsolationKata:
		if gvisor || release == hostRelease {
			t.Errorf("isolation kata: kernel %q (log %q), want a guest kernel, not the host's %q", release, log, hostRelease)
		}
	default:
		t.Fatalf("Features.Isolation %q is not an isolation level", iso)
	}
}

// testSocketMount: a host Unix socket mounted writable into the sandbox
// (how the bridge's tools, model and egress sockets get there) takes
// connections from inside; gVisor needs its host-uds setting for it.
func (c *suite) testSocketMount(t *testing.T) {
	dir := c.hostDir(t)
	sock := filepath.Join(dir, "t.sock")
	ln, err := net.Listen("unix", sock)
	if err != nil {
		t.Fatal(err)
	}
	// The sandbox user connects: the socket is theirs to write.
	if err := os.Chmod(sock, 0o777); err != nil {
		t.Fatal(err)
	}
	srv := &http.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		fmt.Fprintf(w, "hello %s", r.URL.Path)
	})}
	done := make(chan error, 1)
	go func() { done <- srv.Serve(ln) }()
	t.Cleanup(func() {
		_ = srv.Close()
		if err := <-done; !errors.Is(err, http.ErrServerClosed) {
			t.Errorf("serve: %v", err)
		}
	})
	const target = "/run/agentbox-test.sock"
	sb := c.sandbox(t, func(s *sandbox.Spec) {
		s.Mounts = []sandbox.Mount{{Source: sock, Target: target, Writable: true}}
	})
	res, err := sb.Exec(context.Background(), sandbox.ExecRequest{Argv: []string{"curl", "-sS", "--max-time", "30", "--unix-socket", target, "http://sandbox/from-inside"}})
	if err != nil {
		t.Fatal(err)
	}
	if res.ExitCode != 0 || res.Stdout != "hello /from-inside" {
		t.Errorf("request over the mounted socket: exit %d, stdout %q, stderr %q", res.ExitCode, res.Stdout, res.Stderr)
	}
}
