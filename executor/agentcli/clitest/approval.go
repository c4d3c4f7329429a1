package clitest

import (
	"context"
	"encoding/json"
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"

	"github.com/agentbox/agentbox/assistant"
	"github.com/agentbox/agentbox/chat"
	"github.com/agentbox/agentbox/executor"
	"github.com/agentbox/agentbox/executor/agentcli"
	"github.com/agentbox/agentbox/scripted"
)

// Approval is the Docker scenario of a CLI that asks before its tools run
// (executor.Request.Approve, the assistant's approval policy): a shell
// command asked and allowed runs; one denied does not, and the model
// reads the reason; one the CLI would run unasked (cat) is asked when a
// rule names it (Request.PermissionAsk). The shell's calls are asked as
// the rules name them: Bash with {"command"}. With Keep both turns go to one kept CLI, else
// each to a CLI of its own.
type Approval struct {
	CLI  string
	Exec executor.Executor
	Type string
	// Shell is the shell tool as the model calls it, Input turns a
	// command into its input.
	Shell string
	Input func(command string) map[string]any
	Keep  bool
	// ReadsUnasked: the CLI runs the shell commands it knows only read
	// unasked, whatever the rules name (the Gemini CLI).
	ReadsUnasked bool
}

// Asked is a call the scenario's Approve was asked about.
type Asked struct {
	Tool  string
	Input json.RawMessage
}

// Run runs the scenario and returns the calls asked about.
func (a Approval) Run(t *testing.T) []Asked {
	t.Helper()
	if testing.Short() {
		t.Skip("-short: starts containers")
	}
	ctx, cancel := context.WithTimeout(context.Background(), 3*turnTimeout)
	defer cancel()
	const reason = "not-this-one-7731"
	srv := scripted.NewServer(&scripted.Script{Turns: []scripted.Turn{
		{When: &scripted.Match{Contains: "run the first"}, ToolCalls: []scripted.ToolCall{{Name: a.Shell, Input: a.Input("echo ok-4411 > allowed.txt && cat allowed.txt")}}},
		{When: &scripted.Match{Contains: reason}, Text: "Denied noted."},
		{When: &scripted.Match{AfterToolResult: a.Shell}, Text: "First ran."},
		{When: &scripted.Match{Contains: "run the second"}, ToolCalls: []scripted.ToolCall{{Name: a.Shell, Input: a.Input("echo no > denied.txt")}}},
		{When: &scripted.Match{AfterToolResult: a.Shell}, Text: "Went on."},
		{When: &scripted.Match{Contains: "run the third"}, ToolCalls: []scripted.ToolCall{{Name: a.Shell, Input: a.Input("cat allowed.txt")}}},
		{When: &scripted.Match{AfterToolResult: a.Shell}, Text: "Third ran."},
	}})
	t.Cleanup(srv.Close)
	d := NewDocker(t, ctx, a.CLI, a.Exec, srv, a.Type)
	// A command a CLI would run unasked (it only reads) is asked when a
	// rule names it.
	d.PermissionAsk = []string{"Bash(cat:*)"}
	var mu sync.Mutex
	var asked []Asked
	d.Approve = func(tool string, input json.RawMessage, id string) (bool, string) {
		mu.Lock()
		asked = append(asked, Asked{tool, input})
		mu.Unlock()
		if tool == "Bash" && strings.Contains(string(input), "denied.txt") {
			return false, "The user denied this tool call: " + reason
		}
		return true, ""
	}
	k := d.Keep(ctx, &assistant.Assistant{ID: "a"}, "chat-approval")
	k.KeepAlive = a.Keep
	dir := k.Sandbox().Workspace().Dir()
	turn := func(input string) *executor.Result {
		t.Helper()
		res, log, err := k.Turn(ctx, input, nil)
		if err != nil {
			t.Fatalf("turn %q: %v (model requests %d; events %v)", input, err, len(srv.Requests()), log.Events())
		}
		for _, e := range log.Starts(chat.TypeNotice) {
			if e.Props["code"] == agentcli.NoticeCLIHung {
				t.Errorf("turn %q: the CLI did not end with its turn: %v", input, e.Props)
			}
		}
		if a.Keep && !k.Kept() {
			t.Errorf("turn %q did not keep its CLI", input)
		}
		return res
	}
	res := turn("run the first")
	if res.Content != "First ran." {
		t.Errorf("turn 1 answered %q", res.Content)
	}
	if b, err := os.ReadFile(filepath.Join(dir, "allowed.txt")); err != nil || string(b) != "ok-4411\n" {
		t.Errorf("the allowed command did not run: %q %v", b, err)
	}
	res = turn("run the second")
	if !strings.Contains(res.Content, "Denied noted.") {
		t.Errorf("turn 2 answered %q: the model did not read the reason", res.Content)
	}
	if _, err := os.Stat(filepath.Join(dir, "denied.txt")); !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("the denied command ran (%v)", err)
	}
	want := []string{"echo ok-4411 > allowed.txt && cat allowed.txt", "echo no > denied.txt"}
	if !a.ReadsUnasked {
		turn("run the third")
		want = append(want, "cat allowed.txt")
	}
	mu.Lock()
	defer mu.Unlock()
	var bash []string
	for _, c := range asked {
		if c.Tool == "Bash" {
			var in struct{ Command string }
			_ = json.Unmarshal(c.Input, &in)
			bash = append(bash, in.Command)
		}
	}
	// As the model wrote them, not as the CLI runs them (bash -lc '...'):
	// Bash rules match the model's command.
	if !slices.Equal(bash, want) {
		t.Errorf("Bash calls asked %q, want %q", bash, want)
	}
	return asked
}
