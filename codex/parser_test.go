package codex

import (
	"os"
	"testing"

	"github.com/agentbox/agentbox/chat"
	"github.com/agentbox/agentbox/chat/chattest"
)

// stopper records that the parser stopped the CLI.
type stopper struct{ stopped, answered bool }

func (s *stopper) Answered()    { s.answered = true }
func (s *stopper) Busy(bool)    {}
func (s *stopper) Settled(bool) {}
func (s *stopper) Stop()        { s.stopped = true }

// TestMaxTurns: the recorded turn takes three model steps; with max_turns
// 2 the third ends the turn with a max_turns error and stops the CLI.
func TestMaxTurns(t *testing.T) {
	f, err := os.Open("../testdata/codex/codex_tools.jsonl")
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	var log chattest.Recorder
	m := &stopper{}
	p := NewParser(log.Emit, ParserOptions{MaxTurns: 2, Monitor: m})
	if err := p.Parse(f); err != nil {
		t.Fatal(err)
	}
	out := p.Close()
	chattest.Check(t, log.Events())
	if out.Err == nil || out.Err.Code != chat.ErrMaxTurns || out.Subtype != "error_max_turns" || !m.stopped || m.answered {
		t.Errorf("outcome %+v, monitor %+v", out, m)
	}
	// Unlimited, the same turn answers in three steps.
	f2, _ := os.Open("../testdata/codex/codex_tools.jsonl")
	defer f2.Close()
	p = NewParser(func(chat.Event) {}, ParserOptions{MaxTurns: 3})
	_ = p.Parse(f2)
	if out := p.Close(); out.Err != nil || out.Usage.Turns != 3 {
		t.Errorf("max_turns 3: %+v", out)
	}
}
