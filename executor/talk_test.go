package executor

import (
	"errors"
	"testing"

	"github.com/agentbox/agentbox/chat"
)

type fakeTalker struct {
	said        []string
	interrupted int
}

func (f *fakeTalker) Say(m chat.Message) error { f.said = append(f.said, m.Content); return nil }
func (f *fakeTalker) Interrupt() error         { f.interrupted++; return nil }

// TestTalk: a Talk reaches its CLI only while one is attached: before, it
// cannot talk; after, the turn is ending.
func TestTalk(t *testing.T) {
	var nilTalk *Talk
	if err := nilTalk.Say(chat.Message{Content: "x"}); !errors.Is(err, ErrCannotTalk) {
		t.Errorf("nil Talk: %v", err)
	}
	var k Talk
	if err := k.Interrupt(); !errors.Is(err, ErrCannotTalk) {
		t.Errorf("nothing attached: %v", err)
	}
	f := &fakeTalker{}
	detach := k.Attach(f)
	if err := k.Say(chat.Message{Content: "hi"}); err != nil {
		t.Fatal(err)
	}
	if err := k.Interrupt(); err != nil {
		t.Fatal(err)
	}
	detach()
	if err := k.Say(chat.Message{Content: "late"}); !errors.Is(err, ErrTurnEnding) {
		t.Errorf("detached: %v", err)
	}
	if len(f.said) != 1 || f.said[0] != "hi" || f.interrupted != 1 {
		t.Errorf("talker got %v and %d interrupts", f.said, f.interrupted)
	}
}
