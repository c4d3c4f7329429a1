package agentcli

import (
	"bufio"
	"context"
	"errors"
	"io"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/agentbox/agentbox/chat"
	"github.com/agentbox/agentbox/executor"
	"github.com/agentbox/agentbox/sandbox"
	"github.com/agentbox/agentbox/sandbox/sandboxtest"
)

// talkParser is a Talker whose CLI answers "SAY text" with "TOOK" and an
// interrupt with "RESULT"; the turn settles on its result once every
// message sent into it was taken.
type talkParser struct {
	r        *Run
	awaiting int
	result   bool
	onLine   func(string)
}

func (p *talkParser) Line(l Line) {
	switch s := string(l.Bytes); s {
	case "TOOK":
		p.awaiting--
	case "RESULT":
		p.result = true
	default:
		p.onLine(s)
	}
	p.r.Settled(p.result && p.awaiting == 0)
}

func (p *talkParser) Finish() Finished { return &Outcome{} }

func (p *talkParser) Say(m chat.Message) ([]byte, int, error) {
	p.awaiting++
	p.r.Settled(false)
	return []byte("SAY " + m.Content + "\n"), 7, nil
}

func (p *talkParser) Interrupt() ([]byte, error) { return []byte("INTERRUPT\n"), nil }

// TestTalkToKeptRun: a message sent into a kept run's turn reaches the
// CLI's input after the turn's own, holds the turn open until the CLI took
// it, and is reported with its position; the interrupt ends the turn with
// the CLI still up; once the turn ended, the Talk answers ErrTurnEnding.
func TestTalkToKeptRun(t *testing.T) {
	t.Parallel()
	var read []string
	var mu sync.Mutex
	h := func(ctx context.Context, cmd *sandboxtest.Cmd) (int, error) {
		in := bufio.NewReader(cmd.Stdin)
		for {
			l, err := in.ReadString('\n')
			if err != nil {
				return 0, nil
			}
			l = strings.TrimSpace(l)
			mu.Lock()
			read = append(read, l)
			mu.Unlock()
			switch {
			case l == "PROMPT":
				io.WriteString(cmd.Stdout, "WORKING\n")
			case strings.HasPrefix(l, "SAY "):
				io.WriteString(cmd.Stdout, "TOOK\n")
			case l == "INTERRUPT":
				io.WriteString(cmd.Stdout, "RESULT\n")
			}
		}
	}
	run, xe := Start(context.Background(), Spec{CLI: "fake-cli", ErrorID: "fk-error", Emit: func(chat.Event) {},
		Exec: sandbox.ExecRequest{Argv: []string{"fake-cli"}}, Sandbox: sandboxtest.New(t, sandboxtest.Config{Handler: sandboxtest.HandlerFunc(h)}),
		Input: []byte("PROMPT\n"), Keep: true, GracePeriod: time.Second})
	if xe != nil {
		t.Fatal(xe)
	}
	defer run.Close()
	var talk executor.Talk
	talked := make(chan error, 1)
	p := &talkParser{r: run}
	p.onLine = func(s string) {
		if s == "WORKING" {
			// Not from the output's goroutine: Say waits for its lines.
			go func() {
				err := talk.Say(chat.Message{Role: chat.RoleUser, Content: "use tabs"})
				if err == nil {
					err = talk.Interrupt()
				}
				talked <- err
			}()
		}
	}
	detach := run.talk(&talk, p)
	exit := run.Wait(p.Line)
	detach()
	if err := <-talked; err != nil {
		t.Fatal(err)
	}
	if !exit.Alive || !run.Alive() {
		t.Errorf("the interrupted turn left the CLI down: exit alive %v, run alive %v", exit.Alive, run.Alive())
	}
	if said := run.said(); len(said) != 1 || said[0] != (chat.Said{Content: "use tabs", At: 7}) {
		t.Errorf("said %+v", said)
	}
	mu.Lock()
	got := strings.Join(read, "|")
	mu.Unlock()
	if got != "PROMPT|SAY use tabs|INTERRUPT" {
		t.Errorf("the CLI read %q", got)
	}
	if err := talk.Say(chat.Message{Content: "late"}); !errors.Is(err, executor.ErrTurnEnding) {
		t.Errorf("a message after the turn: %v", err)
	}
}
