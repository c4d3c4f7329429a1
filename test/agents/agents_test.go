// Package agents runs the example app's codex, gemini and opencode
// assistants end to end through the agentbox binary: `agentbox run`, and
// `agentbox serve` with the native event stream and the OpenAI-compatible
// /v1/chat/completions. Each assistant's real CLI runs in its Docker
// sandbox against a scripted model (the example's script, through the bridge's
// model proxy) for two turns of one chat: the second resumes the CLI's
// session and finds the first turn's file in the workspace. The Create and
// Next hooks run (a notice, a git commit) and the host tool "remember"
// answers from the host.
package agents

import (
	"encoding/json"
	"path/filepath"
	"strings"
	"testing"

	"github.com/agentbox/agentbox/chat"
	"github.com/agentbox/agentbox/chat/chattest"
	"github.com/agentbox/agentbox/internal/e2etest"
	"github.com/agentbox/agentbox/internal/testenv"
	"github.com/agentbox/agentbox/scripted"
)

// cli is how a CLI's agent calls the tools the scripts use.
type cli struct {
	name  string
	shell string // the shell tool
	input func(command string) map[string]any
	host  string // the host tool "remember"
}

var clis = []cli{
	{"codex", "exec_command", func(c string) map[string]any { return map[string]any{"cmd": c} }, "mcp__agentbox__remember"},
	{"gemini", "run_shell_command", func(c string) map[string]any { return map[string]any{"command": c, "description": "show"} }, "mcp_agentbox_remember"},
	{"opencode", "bash", func(c string) map[string]any { return map[string]any{"command": c, "description": "show"} }, "agentbox_remember"},
}

const (
	prompt1 = "Write a greeting program and run it."
	prompt2 = "What is in hello.sh now?"
	answer1 = "Done. I created `hello.sh` in your workspace and ran it: it prints\n\"Hello from agentbox\". Run it again any time with `sh hello.sh`.\n"
	answer2 = "hello.sh echoes the greeting."
)

// model starts a scripted model server for one chat of c: the example app's
// script for the first turn, and for the second (the prompt asks what is
// in hello.sh) a shell call that shows the file, then an answer.
func model(t *testing.T, c cli) *scripted.Server {
	t.Helper()
	s, err := scripted.LoadScript(filepath.Join(testenv.RepoRoot(), "examples", "app", "connectors", "scripted", c.name+".yaml"))
	if err != nil {
		t.Fatal(err)
	}
	// The first of the second turn's goes before the script's turns (its
	// prompt picks it), the other after them (the script's own turn after
	// a shell result is used by then).
	s.Turns = append([]scripted.Turn{{When: &scripted.Match{Contains: "What is in hello.sh"}, ToolCalls: []scripted.ToolCall{{Name: c.shell, Input: c.input("cat hello.sh")}}}}, s.Turns...)
	s.Turns = append(s.Turns, scripted.Turn{When: &scripted.Match{AfterToolResult: c.shell}, Text: answer2})
	srv := scripted.NewServer(s)
	t.Cleanup(srv.Close)
	return srv
}

// cliNames are the names of clis.
func cliNames() []string {
	names := make([]string, len(clis))
	for i, c := range clis {
		names[i] = c.name
	}
	return names
}

// TestAgentsThroughBinary: for each CLI, two turns of a chat through
// `agentbox run`, then two turns of another chat through `agentbox serve`
// (the first on the native API, the second on /v1/chat/completions).
func TestAgentsThroughBinary(t *testing.T) {
	if testing.Short() {
		t.Skip("-short: starts containers")
	}
	testenv.Docker(t)
	app := newApp(t, cliNames())

	// Each chat gets its own model server: the serve chats' are set now,
	// for the one server process; each run process gets its own.
	served := map[string]*scripted.Server{}
	var serveEnv []string
	for _, c := range clis {
		served[c.name] = model(t, c)
		serveEnv = append(serveEnv, "E2E_HOST_"+strings.ToUpper(c.name)+"="+served[c.name].URL)
	}

	t.Run("run", func(t *testing.T) {
		for _, c := range clis {
			t.Run(c.name, func(t *testing.T) {
				t.Parallel()
				srv := model(t, c)
				env := []string{"E2E_HOST_" + strings.ToUpper(c.name) + "=" + srv.URL}
				chatID := "run-" + c.name
				ev1 := e2etest.Run(t, app, env, "--user", "alice", "--chat", chatID, c.name, prompt1)
				session := checkFirst(t, c, ev1)
				n := len(srv.TurnRequests())
				ev2 := e2etest.Run(t, app, env, "--user", "alice", "--chat", chatID, c.name, prompt2)
				checkSecond(t, c, ev2, session)
				checkResumed(t, srv, n)
			})
		}
	})

	t.Run("serve", func(t *testing.T) {
		s := serve(t, app, serveEnv)
		for _, c := range clis {
			t.Run(c.name, func(t *testing.T) {
				t.Parallel()
				srv := served[c.name]
				chatID := "serve-" + c.name
				ev1 := s.native(t, c.name, chatID, prompt1)
				checkFirst(t, c, ev1)
				n := len(srv.TurnRequests())
				content, gotChat := s.completion(t, c.name, chatID, []map[string]string{
					{"role": "user", "content": prompt1},
					{"role": "assistant", "content": finalOf(t, ev1).Content},
					{"role": "user", "content": prompt2},
				})
				if gotChat != chatID {
					t.Errorf("X-Chat-ID %q, want %q", gotChat, chatID)
				}
				if !strings.Contains(content, answer2) {
					t.Errorf("completion content %q lacks %q", content, answer2)
				}
				if strings.Contains(content, secretKey) {
					t.Error("the connector's key is in the completion")
				}
				checkResumed(t, srv, n)
			})
		}
	})
}

// finalOf returns the done event's Final; it fails t unless the turn
// succeeded.
func finalOf(t *testing.T, events []chat.Event) *chat.Final {
	t.Helper()
	if len(events) == 0 {
		t.Fatal("no events")
	}
	last := events[len(events)-1]
	if last.Event != chat.Done || last.Final == nil || last.Final.Error != "" {
		b, _ := json.Marshal(events)
		t.Fatalf("the turn failed: %+v\nevents: %s", last.Final, b)
	}
	return last.Final
}

// sessionOf returns the session id of the turn's session event.
func sessionOf(events []chat.Event) string {
	for _, e := range events {
		if e.Event == chat.Start && e.Type == chat.TypeSession {
			id, _ := e.Props["session_id"].(string)
			return id
		}
	}
	return ""
}

// notice returns the message of the notice with code, or "".
func notice(events []chat.Event, code string) string {
	for _, e := range events {
		if e.Event == chat.Start && e.Type == "notice" && e.Props["code"] == code {
			msg, _ := e.Props["message"].(string)
			return msg
		}
	}
	return ""
}

// toolResult returns the content of the first result of tool name.
func toolResult(events []chat.Event, name string) (string, bool) {
	for _, e := range events {
		if e.Event == chat.Start && e.Type == chat.TypeToolResult && e.Props["name"] == name {
			s, _ := e.Props["content"].(string)
			return s, true
		}
	}
	return "", false
}

// checkCommon checks what every turn shows: a well-formed stream without
// the connector's key, the Create hook's notice and a session.
func checkCommon(t *testing.T, events []chat.Event) *chat.Final {
	t.Helper()
	chattest.Check(t, events)
	final := finalOf(t, events)
	if b, _ := json.Marshal(events); strings.Contains(string(b), secretKey) {
		t.Error("the connector's key is in the events")
	}
	if notice(events, "workspace_ready") == "" {
		t.Error("no workspace_ready notice from the Create hook")
	}
	return final
}

// checkFirst checks the first turn and returns its session id: the shell
// wrote and ran hello.sh, the host tool saved the note, the Next hook
// committed.
func checkFirst(t *testing.T, c cli, events []chat.Event) string {
	t.Helper()
	final := checkCommon(t, events)
	if !strings.Contains(final.Content, answer1) {
		t.Errorf("content %q", final.Content)
	}
	if out, ok := toolResult(events, c.host); !ok || !strings.Contains(out, `"saved":true`) || !strings.Contains(out, "hello.sh prints the greeting") {
		t.Errorf("host tool %s result %q (found %v)", c.host, out, ok)
	}
	if msg := notice(events, "workspace_ready"); msg != "Workspace ready (0 entries)" {
		t.Errorf("workspace_ready notice %q: the chat's workspace was not new", msg)
	}
	if msg := notice(events, "committed"); !strings.HasPrefix(msg, "Committed 2 files as ") {
		t.Errorf("committed notice %q (Next hook)", msg)
	}
	if final.Usage.InputTokens == 0 || final.Usage.OutputTokens == 0 {
		t.Errorf("usage %+v", final.Usage)
	}
	session := sessionOf(events)
	if session == "" || final.SessionID != session {
		t.Errorf("session event %q, final %q", session, final.SessionID)
	}
	return session
}

// checkSecond checks the second turn: the same session, and the file the
// first turn wrote is in the workspace.
func checkSecond(t *testing.T, c cli, events []chat.Event, session string) {
	t.Helper()
	final := checkCommon(t, events)
	if final.Content != answer2 {
		t.Errorf("content %q, want %q", final.Content, answer2)
	}
	if got := sessionOf(events); got != session {
		t.Errorf("session %q, want the first turn's %q (resumed)", got, session)
	}
	if out, _ := toolResult(events, shellResultName(c)); !strings.Contains(out, `echo "Hello from agentbox"`) {
		t.Errorf("cat hello.sh showed %q: the workspace lost the first turn's file", out)
	}
	if msg := notice(events, "workspace_ready"); msg == "Workspace ready (0 entries)" || msg == "" {
		t.Errorf("workspace_ready notice %q: the workspace was not kept", msg)
	}
}

// shellResultName is the name a CLI's shell tool results carry in events
// (Codex reports its command executions as "shell").
func shellResultName(c cli) string {
	if c.name == "codex" {
		return "shell"
	}
	return c.shell
}

// checkResumed checks the model requests of the second turn (those after
// the first n): its first request carries the first turn's tool results,
// so the CLI resumed its session rather than starting over with the
// history in its prompt.
func checkResumed(t *testing.T, srv *scripted.Server, n int) {
	t.Helper()
	reqs := srv.TurnRequests()
	if len(reqs) <= n {
		t.Fatalf("the second turn made no model request (%d before, %d after)", n, len(reqs))
	}
	first := reqs[n]
	if got := len(first.AllToolResults()); got < 2 {
		t.Errorf("the second turn's first request has %d tool results; want the first turn's 2 (session resumed)", got)
	}
	if strings.Contains(first.LastUserText(), "conversation so far") {
		t.Errorf("a resumed session got the history in its prompt: %q", first.LastUserText())
	}
	for _, r := range reqs {
		if strings.Contains(string(r.Body), secretKey) {
			t.Errorf("the key is in a request body to %s", r.Path)
		}
	}
}
