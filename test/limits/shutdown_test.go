package limits

import (
	"context"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/agentbox/agentbox/internal/e2etest"
)

// TestShutdownDeadline: SIGTERM drains for drain_timeout, then cancels the
// turn that would never end, removes its sandbox and bridge folder, and
// exits 0, instead of waiting for the turn.
func TestShutdownDeadline(t *testing.T) {
	if testing.Short() {
		t.Skip("-short: integration test")
	}
	t.Parallel()
	s := start(t, newApp(t, `"drain_timeout": "3s"`, stallScript), "")
	chatID := e2etest.NewID("shut")
	got := make(chan e2etest.Reply, 1)
	go func() { got <- s.Chat(context.Background(), e2etest.TokenAlice, "coder", chatID, "Say hi.") }()
	e2etest.WaitUntil(t, 60*time.Second, "the turn's sandbox", func() bool { return len(e2etest.ChatContainers(t, chatID)) == 1 })
	e2etest.WaitUntil(t, 30*time.Second, "the CLI's model call", func() bool {
		return strings.Contains(s.Logs.String(), "bridge model request") || len(bridgeDirs(t, s.tmp)) == 1
	})
	time.Sleep(time.Second) // the CLI is waiting on the stalled model now

	took := s.Stop(syscall.SIGTERM, 60*time.Second)
	if ok, code := s.Exited(); !ok || code != 0 {
		t.Errorf("exit code %d", code)
	}
	t.Logf("SIGTERM with a turn that never ends: exited after %s (drain_timeout 3s)", took.Round(10*time.Millisecond))
	if took < 3*time.Second || took > 20*time.Second {
		t.Errorf("exited after %s: want the 3s drain, then cancel and cleanup", took)
	}
	if left := e2etest.ChatContainers(t, chatID); len(left) != 0 {
		t.Errorf("containers left: %v", left)
	}
	if left := bridgeDirs(t, s.tmp); len(left) != 0 {
		t.Errorf("bridge folders left: %v", left)
	}
	// The client learns why its turn ended.
	r := <-got
	if f := r.Final(); r.Status != 200 || f == nil || f.Error != "shutting_down" {
		t.Errorf("the canceled turn: status %d, done %+v, want a stream ending with error shutting_down", r.Status, f)
	}
	for _, want := range []string{"draining running requests", "canceling running requests", "stopped"} {
		if !strings.Contains(s.Logs.String(), want) {
			t.Errorf("log lacks %q", want)
		}
	}
	if strings.Contains(s.Logs.String(), "handlers still running") {
		t.Error("a handler outlived the shutdown")
	}
}

// TestSecondSignalExitsAtOnce: with a long drain_timeout, a second SIGTERM
// skips the rest of the drain: the turn is canceled, its sandbox removed,
// and the server exits without waiting for the drain.
func TestSecondSignalExitsAtOnce(t *testing.T) {
	if testing.Short() {
		t.Skip("-short: integration test")
	}
	t.Parallel()
	s := start(t, newApp(t, `"drain_timeout": "10m"`, stallScript), "")
	chatID := e2etest.NewID("sig2")
	go s.Chat(context.Background(), e2etest.TokenAlice, "coder", chatID, "Say hi.")
	e2etest.WaitUntil(t, 60*time.Second, "the turn's sandbox", func() bool { return len(e2etest.ChatContainers(t, chatID)) == 1 })
	time.Sleep(2 * time.Second)

	_ = s.Cmd.Process.Signal(syscall.SIGTERM)
	time.Sleep(time.Second)
	if ok, _ := s.Exited(); ok {
		t.Fatal("the server exited at the first SIGTERM with a turn running: it must drain")
	}
	took := s.Stop(syscall.SIGTERM, 60*time.Second)
	t.Logf("second SIGTERM: exited after %s (drain_timeout 10m)", took.Round(10*time.Millisecond))
	if took > 20*time.Second {
		t.Errorf("second SIGTERM: exited after %s", took)
	}
	if left := e2etest.ChatContainers(t, chatID); len(left) != 0 {
		t.Errorf("containers left: %v", left)
	}
	if left := bridgeDirs(t, s.tmp); len(left) != 0 {
		t.Errorf("bridge folders left: %v", left)
	}
	if !strings.Contains(s.Logs.String(), "second signal") {
		t.Error("log lacks the second signal")
	}
}
