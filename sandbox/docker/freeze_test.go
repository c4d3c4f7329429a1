package docker_test

import (
	"context"
	"os/exec"
	"testing"
	"time"

	"github.com/agentbox/agentbox/sandbox"
)

// TestFreezeAnswerLost: a pause or an unpause whose answer was lost (the
// engine did it, the call failed) is taken for done: Freeze of a paused
// container and Thaw of a running one succeed, so a kept chat is never
// left paused with no thaw to come.
func TestFreezeAnswerLost(t *testing.T) {
	if testing.Short() {
		t.Skip("-short: integration test")
	}
	rt, _ := newRuntime(t)
	sb, _ := newSandbox(t, rt, nil)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	docker := func(args ...string) {
		t.Helper()
		if out, err := exec.CommandContext(ctx, "docker", args...).CombinedOutput(); err != nil {
			t.Fatalf("docker %v: %v: %s", args, err, out)
		}
	}
	docker("pause", sb.ID())
	if err := sb.Freeze(ctx); err != nil {
		t.Fatalf("Freeze of a paused container: %v", err)
	}
	if err := sb.Thaw(ctx); err != nil {
		t.Fatalf("Thaw: %v", err)
	}
	if err := sb.Thaw(ctx); err != nil {
		t.Fatalf("Thaw of a running container: %v", err)
	}
	if res, err := sb.Exec(ctx, sandbox.ExecRequest{Argv: []string{"true"}}); err != nil || res.ExitCode != 0 {
		t.Fatalf("exec after the thaw: %+v, %v", res, err)
	}
	if err := sb.Remove(ctx); err != nil {
		t.Fatal(err)
	}
	if err := sb.Thaw(ctx); err == nil {
		t.Error("Thaw of a removed container succeeded")
	}
}
