package clitest

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/agentbox/agentbox/chat"
	"github.com/agentbox/agentbox/executor/agentcli"
	"github.com/agentbox/agentbox/executor/agentcli/acp"
)

// ACPConn is the conversation a recorded Agent Client Protocol transcript
// dir/NAME.jsonl continues: for "next" (a kept CLI's later turn) the one
// dir/first.jsonl opened, with the prompt "second" pending; for any other
// a new one whose initialize request is sent (the ids of the recording:
// initialize 1, session 2, prompt 3). newParser makes the parser that
// reads first.jsonl.
func ACPConn(t *testing.T, dir, name string, newParser func(*acp.Conn, chat.EmitFunc) *acp.Parser) *acp.Conn {
	t.Helper()
	conn := acp.NewConn("/workspace", "", "first")
	conn.Start()
	if name != "next" {
		return conn
	}
	f, err := os.Open(filepath.Join(dir, "first.jsonl"))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	p := newParser(conn, func(chat.Event) {})
	if err := p.Parse(f); err != nil {
		t.Fatal(err)
	}
	if o := p.Close(); !o.GotResult {
		t.Fatalf("first.jsonl has no result: %+v", o)
	}
	if _, err := conn.Next([]chat.Message{{Role: chat.RoleUser, Content: "second"}}); err != nil {
		t.Fatal(err)
	}
	return conn
}

// ACPGolden runs the golden test of the Agent Client Protocol transcripts
// in dir (see ACPConn) with the parsers newParser makes.
func ACPGolden(t *testing.T, dir, pkg string, update bool, newParser func(*acp.Conn, chat.EmitFunc) *acp.Parser) {
	Golden(t, GoldenOptions[*agentcli.StreamOutcome]{
		Dir: dir, Package: pkg, Update: update,
		NewParser: func(name string, emit chat.EmitFunc) Parser[*agentcli.StreamOutcome] {
			return newParser(ACPConn(t, dir, name, newParser), emit)
		},
		Check: func(t *testing.T, got Transcript[*agentcli.StreamOutcome]) {
			if !got.Outcome.GotResult || got.Outcome.SessionID == "" || strings.TrimSpace(got.Outcome.Content) == "" {
				t.Errorf("outcome %+v: want a result, a session and an answer", got.Outcome)
			}
		},
	})
}
