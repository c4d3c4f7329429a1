package pipeline

import (
	"context"
	"sync"
	"testing"

	"github.com/agentbox/agentbox/chat"
	"github.com/agentbox/agentbox/sandbox"
	"github.com/agentbox/agentbox/scripted"
)

// TestSandboxIsolation: a turn's sandbox asks for the assistant's
// isolation, else app.jsonc's, and the progress message names it when it
// is not runc.
func TestSandboxIsolation(t *testing.T) {
	e := newEnv(t, &scripted.Script{}, "")
	coder := e.app.Assistants["coder"]
	e.app.Config.Sandbox.Isolation = sandbox.IsolationGVisor
	ctx := context.Background()
	var mu sync.Mutex
	var loading []map[string]any
	emit := func(ev chat.Event) {
		if ev.Type == chat.TypeLoading && (ev.Event == chat.Start || ev.Event == chat.Replace) && ev.Props["step"] == "sandbox" {
			mu.Lock()
			loading = append(loading, ev.Props)
			mu.Unlock()
		}
	}
	for i, own := range []string{"", sandbox.IsolationRunc} {
		coder.Sandbox.Isolation = own
		if _, err := e.p.Chat(ctx, &Request{UserID: "u", ChatID: "c", AssistantID: "coder", Messages: user("go")}, emit); err != nil {
			t.Fatalf("turn %d: %v", i, err)
		}
	}
	specs := e.rt.Specs()
	if len(specs) != 2 || specs[0].Isolation != sandbox.IsolationGVisor || specs[1].Isolation != sandbox.IsolationRunc {
		t.Errorf("isolations of the sandboxes: %+v, want gvisor (app.jsonc's) then runc (the assistant's)", specs)
	}
	mu.Lock()
	defer mu.Unlock()
	if len(loading) != 2 || loading[0]["message"] != "Starting the sandbox (fake, gvisor)…" || loading[0]["isolation"] != "gvisor" ||
		loading[1]["message"] != "Starting the sandbox (fake)…" || loading[1]["isolation"] != "runc" {
		t.Errorf("loading messages: %v", loading)
	}
}
