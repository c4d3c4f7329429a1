package agentcli

import (
	"bufio"
	"context"
	"errors"
	"io"
	"strings"
	"sync"
	"testing"

	"github.com/agentbox/agentbox/assistant"
	"github.com/agentbox/agentbox/chat"
	"github.com/agentbox/agentbox/executor"
	"github.com/agentbox/agentbox/sandbox/sandboxtest"
)

// primeCLI is a CLI whose keeping mode reads "OPEN" (the opening
// message, Plan.Input) and then a prompt a line, answering each with
// "ANSWER <prompt>". Its command line carries the system prompt, as a
// CLI's configuration would.
type primeCLI struct{ primes bool }

func (c primeCLI) Profile() Profile {
	return Profile{Name: "fake", ErrorID: "fk-error", Primes: c.primes}
}

func (primeCLI) Prepare(ctx context.Context, p *Prepared) (*Plan, error) {
	if !p.Keep {
		return &Plan{Argv: []string{"fake", "--once", p.System}, Input: []byte("PROMPT " + Prompt(p.History, p.Input, "") + "\n")}, nil
	}
	return &Plan{Argv: []string{"fake", "--keep", p.System}, Input: []byte("OPEN\nPROMPT " + Prompt(p.History, p.Input, "") + "\n"),
		Env: map[string]string{"KEY": p.Connector.Key}}, nil
}

func (primeCLI) NextMessage(next Next) ([]byte, error) {
	return []byte("PROMPT " + next.Input[0].Content + "\n"), nil
}

func (primeCLI) NewParser(emit chat.EmitFunc, plan *Plan, m Monitor) Parser {
	return &primeParser{c: NewChat(emit, ChatOptions{IDPrefix: "fk", Monitor: m})}
}

type primeParser struct{ c *Chat }

func (p *primeParser) Line(l Line) {
	if s, ok := strings.CutPrefix(string(l.Bytes), "ANSWER "); ok {
		p.c.Text(s)
		p.c.Result("success")
	}
}

func (p *primeParser) Finish() Finished { return p.c.Close() }

// primeHandler is the fake CLI's process: it counts its starts and
// answers as primeCLI says.
type primeHandler struct {
	mu     sync.Mutex
	starts []string
}

func (h *primeHandler) handle(ctx context.Context, cmd *sandboxtest.Cmd) (int, error) {
	h.mu.Lock()
	h.starts = append(h.starts, strings.Join(cmd.Argv, " "))
	h.mu.Unlock()
	in := bufio.NewReader(cmd.Stdin)
	for {
		l, err := in.ReadString('\n')
		if err != nil {
			return 0, nil
		}
		if s, ok := strings.CutPrefix(strings.TrimSpace(l), "PROMPT "); ok {
			io.WriteString(cmd.Stdout, "ANSWER "+s+"\n")
		}
	}
}

func (h *primeHandler) count() int {
	h.mu.Lock()
	defer h.mu.Unlock()
	return len(h.starts)
}

// TestPrimedCLI: a primed CLI takes the chat's first turn when the turn
// starts it as it was started (no second start; the turn's opening
// message goes to it), and is closed for a new one when the turn differs
// (another system prompt, another key); a CLI without Primes is not
// primed; Prime refuses a chat's request.
func TestPrimedCLI(t *testing.T) {
	t.Parallel()
	a := &assistant.Assistant{ID: "coder"}
	newReq := func(sb *sandboxtest.Sandbox, system, key string) *executor.Request {
		return &executor.Request{Assistant: a, System: system, Sandbox: sb, Connector: executor.Connection{Key: key},
			Emit: func(chat.Event) {}}
	}
	turn := func(req *executor.Request, warm executor.Warm) *executor.Request {
		r := *req
		r.ChatID, r.Input, r.Warm = "c1", []chat.Message{{Role: chat.RoleUser, Content: "hello"}}, warm
		return &r
	}
	x := New(primeCLI{primes: true}, Options{})

	for _, tc := range []struct {
		name         string
		system, key  string
		wantStarts   int
		wantPrimedUp bool
	}{
		{"same", "be brief", "tok-1", 1, false},
		{"other system prompt", "be verbose", "tok-1", 2, false},
		{"other key", "be brief", "tok-2", 2, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			h := &primeHandler{}
			sb := sandboxtest.New(t, sandboxtest.Config{Handler: sandboxtest.HandlerFunc(h.handle), Workspace: sandboxtest.TempWorkspace(t)})
			warm, err := x.Prime(context.Background(), newReq(sb, "be brief", "tok-1"))
			if err != nil {
				t.Fatal(err)
			}
			if !warm.Alive() {
				t.Fatal("the primed CLI is not alive")
			}
			res, err := x.Run(context.Background(), turn(newReq(sb, tc.system, tc.key), warm))
			if err != nil {
				t.Fatal(err)
			}
			if res.Content != "hello" {
				t.Errorf("answer %q", res.Content)
			}
			if h.count() != tc.wantStarts {
				t.Errorf("%d starts, want %d (%q)", h.count(), tc.wantStarts, h.starts)
			}
			if used := res.Timings.Started.IsZero(); used != (tc.wantStarts == 1) {
				t.Errorf("Timings.Started zero %v: the primed CLI used %v", used, tc.wantStarts == 1)
			}
			// Not kept: the turn closed the CLI it ran on.
			if warm.Alive() != tc.wantPrimedUp {
				t.Errorf("primed CLI alive %v after the turn", warm.Alive())
			}
		})
	}

	sb := sandboxtest.New(t, sandboxtest.Config{Handler: sandboxtest.HandlerFunc((&primeHandler{}).handle), Workspace: sandboxtest.TempWorkspace(t)})
	if _, err := New(primeCLI{}, Options{}).Prime(context.Background(), newReq(sb, "", "k")); !errors.Is(err, executor.ErrNotPrimed) {
		t.Errorf("a CLI without Primes: %v", err)
	}
	if _, err := x.Prime(context.Background(), turn(newReq(sb, "", "k"), nil)); err == nil {
		t.Error("Prime took a chat's request")
	}
}
