package executor

import (
	"errors"
	"sync"

	"github.com/agentbox/agentbox/chat"
)

// Talking to a running turn: its user sends a message the agent reads
// before its next step (the CLI's input queues it), or interrupts the
// step at hand, and the chat and its CLI go on. The pipeline makes a Talk
// for each turn (Request.Talk); an executor whose CLI can take mid-turn
// input attaches it while the turn runs.

// Errors of Talk's methods.
var (
	// ErrCannotTalk: the turn's CLI takes no input while it works (it is
	// not kept between turns, or its protocol has no way to): the message
	// waits for the turn to end, or the turn is canceled instead.
	ErrCannotTalk = errors.New("the running turn's CLI takes no message or interrupt now (a kept Claude Code or Codex CLI does, once it has started); send the message when the turn ends, or cancel the turn")
	// ErrTurnEnding: the turn's work is done and it is ending; the
	// message is the chat's next turn.
	ErrTurnEnding = errors.New("the turn is ending; send the message as the chat's next turn")
)

// Talker is a running turn's CLI as a Talk reaches it. Its methods are
// safe for concurrent use.
type Talker interface {
	// Say sends msg to the CLI as its next user input; the turn ends once
	// the CLI has answered it too. ErrTurnEnding when the turn's work is
	// already done.
	Say(msg chat.Message) error
	// Interrupt stops the turn's current step (the model's answer, a
	// tool): the turn ends with what was answered so far and the CLI
	// waits for the chat's next message.
	Interrupt() error
}

// Talk is a running turn's line to its CLI: the pipeline holds it, the
// executor attaches the CLI while it can take mid-turn input. A nil Talk
// has nothing attached. It is safe for concurrent use.
type Talk struct {
	mu    sync.Mutex
	to    Talker
	ended bool
}

// Attach makes t reach to until detach is called; from then on the turn
// is ending (ErrTurnEnding).
func (t *Talk) Attach(to Talker) (detach func()) {
	if t == nil {
		return func() {}
	}
	t.mu.Lock()
	t.to = to
	t.mu.Unlock()
	return func() {
		t.mu.Lock()
		if t.to == to {
			t.to, t.ended = nil, true
		}
		t.mu.Unlock()
	}
}

func (t *Talk) talker() (Talker, error) {
	if t == nil {
		return nil, ErrCannotTalk
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	switch {
	case t.to != nil:
		return t.to, nil
	case t.ended:
		return nil, ErrTurnEnding
	}
	return nil, ErrCannotTalk
}

// Say sends msg to the turn's CLI (Talker.Say); ErrCannotTalk when none
// is attached, ErrTurnEnding once it was detached.
func (t *Talk) Say(msg chat.Message) error {
	to, err := t.talker()
	if err != nil {
		return err
	}
	return to.Say(msg)
}

// Interrupt stops the turn's current step (Talker.Interrupt), with Say's
// errors.
func (t *Talk) Interrupt() error {
	to, err := t.talker()
	if err != nil {
		return err
	}
	return to.Interrupt()
}
