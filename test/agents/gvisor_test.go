package agents

import (
	"strings"
	"testing"

	"github.com/agentbox/agentbox/chat"
	"github.com/agentbox/agentbox/internal/e2etest"
	"github.com/agentbox/agentbox/internal/testenv"
)

// TestAgentsUnderGVisor: each CLI's chat of two turns through `agentbox
// run`, with app.jsonc's sandbox isolation "gvisor": the CLIs, their
// sessions, hooks, the bridge's host tool and model proxy work in gVisor's
// kernel as in the host's. (Claude Code's turn under gVisor is the
// pipeline's TestBridgedTurnInGVisor.)
func TestAgentsUnderGVisor(t *testing.T) {
	if testing.Short() {
		t.Skip("-short: starts containers")
	}
	testenv.GVisor(t)
	app := newAppIsolated(t, cliNames(), "gvisor")
	for _, c := range clis {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			srv := model(t, c)
			env := []string{"E2E_HOST_" + strings.ToUpper(c.name) + "=" + srv.URL}
			chatID := "gvisor-" + c.name
			ev1 := e2etest.Run(t, app, env, "--user", "alice", "--chat", chatID, c.name, prompt1)
			if msg := sandboxLoading(ev1); msg != "Starting the sandbox (docker, gvisor)…" {
				t.Errorf("sandbox loading message %q: the sandbox was not gVisor's", msg)
			}
			session := checkFirst(t, c, ev1)
			n := len(srv.TurnRequests())
			ev2 := e2etest.Run(t, app, env, "--user", "alice", "--chat", chatID, c.name, prompt2)
			checkSecond(t, c, ev2, session)
			checkResumed(t, srv, n)
		})
	}
}

// sandboxLoading is the text of the turn's progress line while its
// sandbox starts.
func sandboxLoading(events []chat.Event) string {
	for _, e := range events {
		if e.Type == chat.TypeLoading && strings.HasPrefix(e.Text, "Starting the sandbox") {
			return e.Text
		}
	}
	return ""
}
