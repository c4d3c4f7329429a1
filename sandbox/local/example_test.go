package local_test

import (
	"context"
	"fmt"
	"log"
	"os"

	"github.com/agentbox/agentbox/sandbox"
	"github.com/agentbox/agentbox/sandbox/local"
)

// Example creates a sandbox with the local runtime (bubblewrap, no Docker)
// over a chat's workspace and runs a command in it. The workspace is
// mounted at /workspace; what the command writes there stays after the
// sandbox is removed.
func Example() {
	ctx := context.Background()
	rt, err := local.New(local.Options{})
	if err != nil {
		log.Fatal(err) // bubblewrap is missing or user namespaces are off
	}

	dataRoot, err := os.MkdirTemp("", "agentbox-example-")
	if err != nil {
		log.Fatal(err)
	}
	defer os.RemoveAll(dataRoot)
	// Run as root, commands run as the sandbox user (1000), who must reach
	// the workspace and own it.
	uid := -1
	if os.Geteuid() == 0 {
		uid = 1000
	}
	if err := os.Chmod(dataRoot, 0o755); err != nil {
		log.Fatal(err)
	}
	workspaces, err := sandbox.NewWorkspaces(dataRoot, uid, uid)
	if err != nil {
		log.Fatal(err)
	}
	ws, release, err := workspaces.Acquire(ctx, "alice", "chat-1")
	if err != nil {
		log.Fatal(err)
	}
	defer release()

	sb, err := rt.Create(ctx, sandbox.Spec{UserID: "alice", ChatID: "chat-1", Workspace: ws})
	if err != nil {
		log.Fatal(err)
	}
	defer sb.Remove(ctx)
	res, err := sb.Exec(ctx, sandbox.ExecRequest{Argv: []string{"sh", "-c", "echo hello > note.txt && pwd && cat note.txt"}})
	if err != nil {
		log.Fatal(err)
	}
	fmt.Print(res.Stdout)
	note, err := ws.ReadFile(ctx, "note.txt", 0)
	fmt.Printf("exit %d, note.txt on the host: %q %v\n", res.ExitCode, note, err)
	// Output:
	// /workspace
	// hello
	// exit 0, note.txt on the host: "hello\n" <nil>
}
