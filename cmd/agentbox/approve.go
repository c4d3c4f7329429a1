package main

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"strings"
	"sync"

	"github.com/agentbox/agentbox/approval"
	"github.com/agentbox/agentbox/chat"
	"github.com/agentbox/agentbox/pipeline"
)

// approver answers the tool calls a turn's approval policy asks about
// (*pipeline.Pipeline).
type approver interface {
	Approve(ctx context.Context, user, chatID, id string, operator bool, a approval.Answer) error
}

// runAsker is how `agentbox run` answers approval requests: on the
// terminal when its input is one ([y]es, [n]o, [a]lways), else with what
// a call nobody answers gets, a denial, at once.
type runAsker struct {
	p          approver
	user, chat string
	// in is the terminal's input (nil: there is none).
	in   *bufio.Reader
	out  io.Writer
	spin *spinner
	// mu keeps one question on the terminal at a time.
	mu sync.Mutex
}

// noTerminalReason is what the agent is told of a call denied because
// nobody could be asked.
const noTerminalReason = "agentbox run has no terminal to ask on, and a call nobody answers is denied"

func newRunAsker(p approver, user, chatID string, stdin io.Reader, out io.Writer, spin *spinner) *runAsker {
	a := &runAsker{p: p, user: user, chat: chatID, out: out, spin: spin}
	if f, ok := stdin.(*os.File); ok && isTerminal(f) {
		a.in = bufio.NewReader(stdin)
	}
	return a
}

// event answers an approval_requested event, in the background: the turn
// waits for the answer, not for the event.
func (a *runAsker) event(e chat.Event) {
	if e.Type != pipeline.TypeApprovalRequested || e.Event != chat.Start {
		return
	}
	go a.ask(e.Props)
}

func (a *runAsker) ask(props map[string]any) {
	id, _ := props["approval_id"].(string)
	if a.in == nil {
		a.answer(id, approval.Answer{Decision: approval.Deny, Reason: noTerminalReason})
		return
	}
	a.mu.Lock()
	defer a.mu.Unlock()
	a.spin.Stop()
	tool, _ := props["tool"].(string)
	rule, _ := props["rule"].(string)
	fmt.Fprintf(a.out, "\n%s wants to run %s (rule %s):\n", "the agent", tool, rule)
	if d, _ := props["diff"].(string); d != "" {
		fmt.Fprint(a.out, indent(d))
	} else {
		in, _ := json.MarshalIndent(props["input"], "", "  ")
		fmt.Fprintln(a.out, indent(string(in)))
	}
	fmt.Fprint(a.out, "allow? [y]es, [n]o, [a]lways for this chat: ")
	line, err := a.in.ReadString('\n')
	if err != nil && line == "" {
		a.answer(id, approval.Answer{Decision: approval.Deny, Reason: noTerminalReason})
		return
	}
	switch strings.ToLower(strings.TrimSpace(line)) {
	case "y", "yes":
		a.answer(id, approval.Answer{Decision: approval.Allow})
	case "a", "always":
		a.answer(id, approval.Answer{Decision: approval.Allow, Remember: true})
	default:
		a.answer(id, approval.Answer{Decision: approval.Deny})
	}
}

func (a *runAsker) answer(id string, ans approval.Answer) {
	if err := a.p.Approve(context.Background(), a.user, a.chat, id, false, ans); err != nil {
		fmt.Fprintf(a.out, "agentbox run: approval %s: %v\n", id, err)
	}
}

func indent(s string) string {
	var b strings.Builder
	for _, l := range strings.SplitAfter(strings.TrimSuffix(s, "\n"), "\n") {
		b.WriteString("  " + l)
	}
	b.WriteString("\n")
	return b.String()
}
