package claude

import (
	"context"
	"os"
	"path/filepath"
	"syscall"
	"testing"
	"time"

	"github.com/agentbox/agentbox/assistant"
)

// TestPrepareOverPlantedFIFOs: FIFOs the agent planted where preparation
// writes or looks (the MCP configuration, the system prompt, the
// transcripts folder, a settings file, the former config folder) do not
// wedge the turn: each is replaced or removed.
func TestPrepareOverPlantedFIFOs(t *testing.T) {
	t.Parallel()
	sb := newHostSandbox(t)
	ws := sb.ws.Dir()
	paths := ConfigPaths("a")
	if err := os.MkdirAll(filepath.Join(ws, paths.Config), 0o700); err != nil {
		t.Fatal(err)
	}
	for _, p := range []string{paths.MCPConfig, SystemPromptFile, paths.Config + "/projects", paths.Config + "/settings.json", ConfigRoot + "/settings.json"} {
		if err := syscall.Mkfifo(filepath.Join(ws, p), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	in := &runInput{assistant: &assistant.Assistant{ID: "a"}, sessionID: SessionID("a", "u", "c"), system: "Be brief."}
	start := time.Now()
	readyWorkspace(t, ctx, sb.ws, in.assistant, in.system)
	p, err := prepare(ctx, sb.ws, in)
	if err != nil {
		t.Fatal(err)
	}
	if d := time.Since(start); d > 5*time.Second {
		t.Errorf("prepare took %s", d)
	}
	if p.resume || !p.promptFile {
		t.Errorf("resume %v, prompt file %v", p.resume, p.promptFile)
	}
	for _, f := range []string{paths.MCPConfig, SystemPromptFile} {
		st, err := os.Lstat(filepath.Join(ws, f))
		if err != nil || !st.Mode().IsRegular() {
			t.Errorf("%s: %v, %v; want a regular file", f, st, err)
		}
	}
	for _, f := range []string{paths.Config + "/settings.json", paths.Config + "/projects", ConfigRoot + "/settings.json"} {
		if _, err := os.Lstat(filepath.Join(ws, f)); !os.IsNotExist(err) {
			t.Errorf("%s FIFO kept: %v", f, err)
		}
	}
}
