package cursor

import (
	"context"
	"os"
	"path/filepath"
	"syscall"
	"testing"
	"time"

	"github.com/agentbox/agentbox/assistant"
	"github.com/agentbox/agentbox/chat"
)

// TestPrepareOverPlantedFIFOs: FIFOs the agent planted where preparation
// reads or writes (the session file, .cursor/mcp.json, the prompt file,
// the rules folder) do not wedge the turn: each is replaced or ignored.
func TestPrepareOverPlantedFIFOs(t *testing.T) {
	t.Parallel()
	ws := openWS(t)
	dir := ws.Dir()
	for _, p := range []string{SessionFile, MCPConfigFile, PromptFile, RulesDir} {
		if err := os.MkdirAll(filepath.Dir(filepath.Join(dir, p)), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := syscall.Mkfifo(filepath.Join(dir, p), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	in := &runInput{assistant: &assistant.Assistant{ID: "a"}, chatID: "c", system: "Be brief.",
		history: []chat.Message{{Role: chat.RoleUser, Content: "earlier"}},
		input:   []chat.Message{{Role: chat.RoleUser, Content: "hi"}}, inlineMax: DefaultInlinePrompt}
	start := time.Now()
	p, err := prepare(ctx, ws, in)
	if err != nil {
		t.Fatal(err)
	}
	if d := time.Since(start); d > 5*time.Second {
		t.Errorf("prepare took %s", d)
	}
	if p.resume != "" || !p.promptFile {
		t.Errorf("resume %q, prompt file %v", p.resume, p.promptFile)
	}
	for _, f := range []string{MCPConfigFile, PromptFile, RulesDir + "/system.mdc"} {
		st, err := os.Lstat(filepath.Join(dir, f))
		if err != nil || !st.Mode().IsRegular() {
			t.Errorf("%s: %v, %v; want a regular file", f, st, err)
		}
	}
}
