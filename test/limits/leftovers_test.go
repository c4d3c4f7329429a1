package limits

import (
	"context"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/agentbox/agentbox/internal/e2etest"
)

// TestCrashLeftovers: a server SIGKILLed mid-turn leaves its sandbox
// container, its bridge socket folder and the run's system prompt file in
// the workspace. The next server on the same host removes them all at
// start, and spares those of another server that still runs.
func TestCrashLeftovers(t *testing.T) {
	if testing.Short() {
		t.Skip("-short: integration test")
	}
	tmp := e2etest.ShortDir(t) // both servers' TMPDIR: one bridge folder parent
	app := newApp(t, `"drain_timeout": "1s"`, stallScript)
	crashed := start(t, app, tmp)
	live := start(t, newApp(t, `"drain_timeout": "1s"`, stallScript), tmp)
	deadChat, liveChat := e2etest.NewID("crash"), e2etest.NewID("alive")
	go crashed.Chat(context.Background(), e2etest.TokenAlice, "coder", deadChat, "Say hi.")
	go live.Chat(context.Background(), e2etest.TokenAlice, "coder", liveChat, "Say hi.")
	prompt := filepath.Join(app, "data", "workspaces", "alice", deadChat, ".agentbox", "claude", "system-prompt.md")
	e2etest.WaitUntil(t, 90*time.Second, "both turns' sandboxes, bridges and the CLI run", func() bool {
		_, err := os.Stat(prompt)
		return err == nil && len(e2etest.ChatContainers(t, deadChat)) == 1 && len(e2etest.ChatContainers(t, liveChat)) == 1 && len(bridgeDirs(t, tmp)) == 2
	})
	liveDirs := bridgeDirs(t, tmp)
	liveContainer := e2etest.ChatContainers(t, liveChat)[0]

	crashed.Stop(syscall.SIGKILL, 30*time.Second)
	time.Sleep(500 * time.Millisecond)
	if len(bridgeDirs(t, tmp)) != 2 {
		t.Fatal("SIGKILL left no bridge folder behind: the test proves nothing")
	}
	if len(e2etest.ChatContainers(t, deadChat)) != 1 {
		// Every agentbox on the host reaps containers whose server is gone
		// (at its start, then every minute): the live server, or another
		// test package's, may come first. The bridge folder and the prompt
		// file are only this data root's to clean.
		t.Logf("the crashed server's container was reaped by another agentbox first (by the live server: %v)", reapedBy(live, deadChat))
	}
	if _, err := os.Stat(prompt); err != nil {
		t.Fatalf("the run's prompt file is not there after the crash: %v", err)
	}

	next := start(t, app, tmp)
	e2etest.WaitUntil(t, 30*time.Second, "the crashed server's container to be reaped", func() bool { return len(e2etest.ChatContainers(t, deadChat)) == 0 })
	if _, err := os.Stat(prompt); !os.IsNotExist(err) {
		t.Errorf("prompt file left in the workspace: %v", err)
	}
	dirs := bridgeDirs(t, tmp)
	if len(dirs) != 1 || !slices.Contains(liveDirs, dirs[0]) {
		t.Errorf("bridge folders after the restart: %v (before: %v); want only the live server's", dirs, liveDirs)
	}
	if got := e2etest.ChatContainers(t, liveChat); len(got) != 1 || got[0] != liveContainer {
		t.Errorf("the live server's container: %v, want %s spared", got, liveContainer)
	}
	if !strings.Contains(next.Logs.String(), "crash leftovers removed") {
		t.Errorf("the new server did not report the leftovers it removed")
	}
	// The workspace itself (the agent's files, the CLI's session) stays.
	if _, err := os.Stat(filepath.Join(app, "data", "workspaces", "alice", deadChat, ".agentbox", "claude")); err != nil {
		t.Errorf("workspace state removed: %v", err)
	}

	// The live server still cleans up after itself.
	live.Stop(syscall.SIGTERM, 60*time.Second)
	if left := e2etest.ChatContainers(t, liveChat); len(left) != 0 {
		t.Errorf("containers left by the live server: %v", left)
	}
	if left := bridgeDirs(t, tmp); len(left) != 0 {
		t.Errorf("bridge folders left: %v", left)
	}
}

// reapedBy reports whether s logged reaping a container of chat.
func reapedBy(s *server, chat string) bool {
	for _, line := range strings.Split(s.Logs.String(), "\n") {
		if strings.Contains(line, "sandbox container reaped") && strings.Contains(line, "chat="+chat) {
			return true
		}
	}
	return false
}
