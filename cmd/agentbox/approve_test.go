package main

import (
	"bufio"
	"bytes"
	"context"
	"strings"
	"sync"
	"testing"

	"github.com/agentbox/agentbox/approval"
	"github.com/agentbox/agentbox/chat"
	"github.com/agentbox/agentbox/pipeline"
)

type fakeApprover struct {
	mu      sync.Mutex
	answers map[string]approval.Answer
	done    chan struct{}
}

func (f *fakeApprover) Approve(_ context.Context, user, chatID, id string, operator bool, a approval.Answer) error {
	f.mu.Lock()
	f.answers[user+"/"+chatID+"/"+id] = a
	f.mu.Unlock()
	f.done <- struct{}{}
	return nil
}

// TestRunAsker: with a terminal run asks (y, a for always, anything else
// a denial), showing a file edit's diff; without one it denies at once.
func TestRunAsker(t *testing.T) {
	t.Parallel()
	f := &fakeApprover{answers: map[string]approval.Answer{}, done: make(chan struct{}, 4)}
	ev := func(id string, props map[string]any) chat.Event {
		props["approval_id"] = id
		return chat.Event{Event: chat.Start, ID: "approval-" + id, Type: pipeline.TypeApprovalRequested, Props: props}
	}
	var out bytes.Buffer
	a := newRunAsker(f, "cli", "c1", strings.NewReader("y\n"), &out, nil)
	a.event(ev("a1", map[string]any{"tool": "Bash", "input": map[string]any{"command": "ls"}}))
	<-f.done
	if got := f.answers["cli/c1/a1"]; got.Decision != approval.Deny || got.Reason != noTerminalReason {
		t.Errorf("without a terminal: %+v", got)
	}

	var mu sync.Mutex
	a = &runAsker{p: f, user: "cli", chat: "c1", in: bufio.NewReader(strings.NewReader("a\nn\n")), out: &lockedWriter{w: &out, mu: &mu}}
	a.event(ev("a2", map[string]any{"tool": "Edit", "rule": "Edit(src/**)", "diff": "--- src/x\n+++ src/x\n-old\n+new\n"}))
	<-f.done
	a.event(ev("a3", map[string]any{"tool": "Bash", "rule": "Bash", "input": map[string]any{"command": "rm x"}}))
	<-f.done
	if got := f.answers["cli/c1/a2"]; got.Decision != approval.Allow || !got.Remember {
		t.Errorf("always: %+v", got)
	}
	if got := f.answers["cli/c1/a3"]; got.Decision != approval.Deny {
		t.Errorf("no: %+v", got)
	}
	mu.Lock()
	defer mu.Unlock()
	if s := out.String(); !strings.Contains(s, "  +new\n") || !strings.Contains(s, `"command": "rm x"`) || !strings.Contains(s, "[a]lways") {
		t.Errorf("terminal:\n%s", s)
	}
}

type lockedWriter struct {
	w  *bytes.Buffer
	mu *sync.Mutex
}

func (l *lockedWriter) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.w.Write(p)
}
