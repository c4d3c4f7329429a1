package sandboxtest

import (
	"cmp"
	"context"
	"crypto/rand"
	"encoding/hex"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/agentbox/agentbox/sandbox"
)

// Factory builds the runtime under test, on its real engine. Run calls it
// once; the factory closes the runtime with t.Cleanup.
type Factory func(t *testing.T) (sandbox.Runtime, Features)

// Features says who commands run as, where a runtime legitimately differs
// from the others, and gives the suite a look at its engine. UID, GID and
// Home are required; the other fields' zero values ask for the strictest
// behaviour, and a runtime opts out of one only with the reason written
// where its Features are made.
type Features struct {
	// UID and GID are who commands run as and who owns the files they
	// create in the workspace (docker and local, run as root: 1000:1000,
	// the sandbox image's agent user).
	UID, GID int
	// Home is $HOME in every command, a writable folder outside the
	// workspace (docker and local: /home/agent).
	Home string
	// Isolation is the sandbox.Spec.Isolation of every sandbox the suite
	// creates ("": the runtime's default, runc); the Isolation check
	// looks from inside at the kernel the commands meet.
	Isolation string
	// MissingProgramExit is the exit code of a command whose program does
	// not exist (0 means 127, the shell's).
	MissingProgramExit int
	// WritableRoot: the root folder itself is writable, although the
	// system folders under it are not (local: bwrap's root is a fresh
	// tmpfs per command, discarded when it ends).
	WritableRoot bool
	// InnerSpecialFiles, when set, is why the FIFOs a command makes in
	// the workspace exist only inside the sandbox (gVisor keeps them in
	// its own kernel): the host side finds nothing there rather than a
	// special file to refuse.
	InnerSpecialFiles string
	// NoTerminal, when set, is why the runtime's sandboxes cannot run
	// commands on a pseudo-terminal (sandbox.TerminalSandbox); the
	// terminal checks are skipped, naming it.
	NoTerminal string
	// Engine looks at the runtime's sandboxes from outside. Nil: a
	// sandbox has nothing on an engine to look at (local: it is a set of
	// processes), and the checks that need one do not run.
	Engine Engine
}

// Engine looks at a runtime's sandboxes from outside, the way an operator
// does with the engine's own tools.
type Engine interface {
	// Labels returns the labels on the sandbox's object (a container's,
	// a pod's).
	Labels(ctx context.Context, sb sandbox.Sandbox) (map[string]string, error)
	// Exists reports whether the sandbox's object still exists.
	Exists(ctx context.Context, sb sandbox.Sandbox) (bool, error)
	// Destroy deletes the sandbox's object behind the runtime's back.
	Destroy(ctx context.Context, sb sandbox.Sandbox) error
}

// Run checks that the runtime newRuntime builds keeps the sandbox
// contracts (sandbox.Runtime, sandbox.Sandbox, sandbox.Process): creation
// and idempotent removal, exec of argv and shell scripts with their env,
// working directory, stdin, separate stdout and stderr, exit codes and
// output caps, streaming Start, Wait and Kill, timeouts and cancellation
// that kill the whole process tree, the workspace shared both ways, the
// sandbox user, a read-only system, no network but loopback by default,
// the isolation asked for, a host Unix socket mounted in (the bridge's
// way), confined file operations, special files the sandbox made refused by the
// host side, a disk limit that stops writes with ENOSPC (where the host
// can enforce one), labels, concurrent commands, and commands on a
// pseudo-terminal.
//
// Its checks run as parallel subtests. Call it from a test that is not
// parallel itself; it sets an environment variable of the test process
// for its duration, to check that the host's environment never reaches a
// command.
func Run(t *testing.T, newRuntime Factory) {
	rt, f := newRuntime(t)
	if f.Home == "" {
		t.Fatal("sandboxtest: Features.Home is empty: say what $HOME commands see")
	}
	if f.MissingProgramExit == 0 {
		f.MissingProgramExit = 127
	}
	c := &suite{rt: rt, f: f, wss: newWorkspaces(t, f)}
	prev, had := os.LookupEnv(hostEnvKey)
	os.Setenv(hostEnvKey, "leak")
	t.Cleanup(func() {
		if had {
			os.Setenv(hostEnvKey, prev)
		} else {
			os.Unsetenv(hostEnvKey)
		}
	})
	for _, tc := range []struct {
		name string
		run  func(t *testing.T)
	}{
		{"CreateRejectsBadSpecs", c.testBadSpecs},
		{"CreateAndRemove", c.testCreateRemove},
		{"CancelThenRemove", c.testCancelThenRemove},
		{"RemoveNotFound", c.testRemoveNotFound},
		{"RemoveKillsRunning", c.testRemoveKillsRunning},
		{"Exec", c.testExec},
		{"ExecRejectsBadRequests", c.testBadRequests},
		{"ExecCanceled", c.testExecCanceled},
		{"TimeoutKillsTree", c.testTimeout},
		{"StartStreams", c.testStartStreams},
		{"StartCancel", c.testStartCancel},
		{"StartTimeout", c.testStartTimeout},
		{"Kill", c.testKill},
		{"StderrNeverBlocks", c.testStderrNeverBlocks},
		{"WorkspaceBothWays", c.testWorkspace},
		{"Hide", c.testHide},
		{"User", c.testUser},
		{"ReadOnlySystem", c.testReadOnly},
		{"NetworkNone", c.testNetworkNone},
		{"Isolation", c.testIsolation},
		{"SocketMount", c.testSocketMount},
		{"Confinement", c.testConfinement},
		{"SpecialFiles", c.testSpecialFiles},
		{"DiskLimit", c.testDiskLimit},
		{"Labels", c.testLabels},
		{"ConcurrentExecs", c.testConcurrent},
		{"Terminal", c.testTerminal},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			tc.run(t)
		})
	}
}

// hostEnvKey is set in the test process and must not reach commands.
const hostEnvKey = "AGENTBOX_SANDBOXTEST_HOST_SECRET"

// prompt bounds a step that must not wait for the command it ends (a
// kill, a cancel, a timeout, a removal): generous, for a machine busy
// with other tests and a Docker exec that can take seconds there, yet
// well below the 30 and 100 second sleeps of those commands, so a step
// that waited for its command still fails.
const prompt = 20 * time.Second

type suite struct {
	rt  sandbox.Runtime
	f   Features
	wss *sandbox.Workspaces
}

// newWorkspaces makes a workspace root the sandbox user can reach (a test
// folder is 0700), owned by that user when the test runs as root.
func newWorkspaces(t *testing.T, f Features) *sandbox.Workspaces {
	t.Helper()
	d := t.TempDir()
	for p := d; p != "/" && p != os.TempDir(); p = filepath.Dir(p) {
		_ = os.Chmod(p, 0o755)
	}
	uid, gid := -1, -1
	if os.Geteuid() == 0 {
		uid, gid = f.UID, f.GID
	}
	wss, err := sandbox.NewWorkspaces(d, uid, gid)
	if err != nil {
		t.Fatal(err)
	}
	return wss
}

// hostDir makes a host folder the sandbox user can reach, for mounts.
func (c *suite) hostDir(t *testing.T) string {
	t.Helper()
	d, err := os.MkdirTemp(filepath.Dir(c.wss.Root()), "host-")
	if err != nil {
		t.Fatal(err)
	}
	if err := os.Chmod(d, 0o755); err != nil {
		t.Fatal(err)
	}
	return d
}

// workspace acquires a workspace of its own for one sandbox.
func (c *suite) workspace(t *testing.T) (*sandbox.Workspace, string) {
	t.Helper()
	chat := "c-" + randHex(4)
	ws, release, err := c.wss.Acquire(context.Background(), "u1", chat)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(release)
	return ws, chat
}

// sandbox creates a sandbox with a workspace of its own, removed when the
// test ends; adjust may change the spec first.
func (c *suite) sandbox(t *testing.T, adjust func(*sandbox.Spec)) sandbox.Sandbox {
	t.Helper()
	ws, chat := c.workspace(t)
	spec := c.spec(ws, chat)
	if adjust != nil {
		adjust(&spec)
	}
	sb, err := c.rt.Create(context.Background(), spec)
	if sb != nil {
		t.Cleanup(func() { _ = sb.Remove(context.Background()) })
	}
	if err != nil {
		t.Fatalf("create: %v", err)
	}
	return sb
}

// spec is the suite's spec for a sandbox of user u1 in chat over ws.
func (c *suite) spec(ws *sandbox.Workspace, chat string) sandbox.Spec {
	return sandbox.Spec{UserID: "u1", ChatID: chat, Workspace: ws, Isolation: c.f.Isolation}
}

// mustExec runs req and fails the test on an error.
func mustExec(t *testing.T, sb sandbox.Sandbox, req sandbox.ExecRequest) *sandbox.ExecResult {
	t.Helper()
	res, err := sb.Exec(context.Background(), req)
	if err != nil {
		t.Fatalf("exec %q: %v", req.Argv, err)
	}
	return res
}

// sh runs a shell script and fails the test on an error.
func sh(t *testing.T, sb sandbox.Sandbox, script string) *sandbox.ExecResult {
	t.Helper()
	return mustExec(t, sb, sandbox.ExecRequest{Argv: []string{script}, Shell: true})
}

func randHex(n int) string {
	b := make([]byte, n)
	_, _ = rand.Read(b)
	return hex.EncodeToString(b)
}

// awaitSleeps waits (up to prompt) until n `sleep marker` processes run in
// sb: seen on the host for runc, from inside for a sandbox with a kernel
// of its own, whose processes the host does not see as such.
func (c *suite) awaitSleeps(sb sandbox.Sandbox, marker string, n int) {
	deadline := time.Now().Add(prompt)
	for time.Now().Before(deadline) {
		if cmp.Or(c.f.Isolation, sandbox.IsolationRunc) == sandbox.IsolationRunc {
			if len(hostProcesses(marker)) >= n {
				return
			}
		} else if res, err := sb.Exec(context.Background(), sandbox.ExecRequest{Argv: []string{"ps", "-eo", "args"}}); err == nil &&
			strings.Count(res.Stdout, "sleep "+marker) >= n {
			return
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// hostProcesses lists the processes of the test's host whose command line
// holds marker. Processes of sandboxes on another machine (a remote
// engine) are not there, and the check passes vacuously.
func hostProcesses(marker string) []string {
	var out []string
	ents, _ := os.ReadDir("/proc")
	for _, e := range ents {
		b, err := os.ReadFile(filepath.Join("/proc", e.Name(), "cmdline"))
		if err == nil && strings.Contains(string(b), marker) && strings.HasPrefix(string(b), "sleep\x00") {
			out = append(out, e.Name())
		}
	}
	return out
}
