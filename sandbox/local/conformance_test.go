package local_test

import (
	"os"
	"testing"

	"github.com/agentbox/agentbox/internal/testenv"
	"github.com/agentbox/agentbox/sandbox"
	"github.com/agentbox/agentbox/sandbox/local"
	"github.com/agentbox/agentbox/sandbox/sandboxtest"
)

// TestConformance runs the runtime conformance suite under bubblewrap.
func TestConformance(t *testing.T) {
	sandboxtest.Run(t, func(t *testing.T) (sandbox.Runtime, sandboxtest.Features) {
		rt, err := local.New(local.Options{Bwrap: testenv.Bwrap(t)})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = rt.Close(t.Context()) })
		// Run as root, commands run as the sandbox user; otherwise as
		// agentbox's own user (an unprivileged user namespace maps no
		// other).
		uid, gid := 1000, 1000
		if os.Geteuid() != 0 {
			uid, gid = os.Getuid(), os.Getgid()
		}
		return rt, sandboxtest.Features{
			UID: uid, GID: gid, Home: "/home/agent",
			// bwrap starts the program itself: a missing one is bwrap's
			// own failure (exit 1, "bwrap: execvp ..."), not a shell's 127.
			MissingProgramExit: 1,
			// bwrap's root is a fresh tmpfs per command, discarded when it
			// ends; the system folders bound into it are read-only.
			WritableRoot: true,
			// A local sandbox is a set of processes: nothing on an engine
			// to label, inspect or delete.
			Engine: nil,
		}
	})
}
