package testrun

import (
	"context"
	"errors"
	"log/slog"
	"strings"
	"testing"

	"github.com/agentbox/agentbox/chat"
	"github.com/agentbox/agentbox/pipeline"
)

// gated holds every turn until its gate opens (or the turn is canceled).
type gated struct {
	*pipeline.Pipeline
	gate    chan struct{}
	started chan struct{}
}

func (g *gated) Chat(ctx context.Context, req *pipeline.Request, emit chat.EmitFunc) (*pipeline.Response, error) {
	select {
	case g.started <- struct{}{}:
	default:
	}
	select {
	case <-g.gate:
	case <-ctx.Done():
		return nil, ctx.Err()
	}
	return g.Pipeline.Chat(ctx, req, emit)
}

func TestServiceRuns(t *testing.T) {
	f := newFixture(t)
	p, err := pipeline.New(pipeline.Config{App: pipeline.Static{App: f.app}, Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		t.Fatal(err)
	}
	defer p.Close(context.Background())
	g := &gated{Pipeline: p, gate: make(chan struct{}), started: make(chan struct{}, 1)}
	svc := NewService(g, f.mem, "test", slog.New(slog.DiscardHandler))
	defer svc.Close(context.Background())

	if _, err := svc.List("nobody"); !errors.Is(err, pipeline.ErrUnknownAssistant) {
		t.Errorf("list unknown = %v", err)
	}
	l, err := svc.List("greeter")
	if err != nil || len(l.Suites) != 2 || len(l.Problems) != 0 {
		t.Fatalf("list = %+v %v", l, err)
	}

	a, err := svc.Start("alice", RunRequest{Assistant: "greeter", Suites: []string{"greeter: tests/inputs.jsonl"}, Run: "^greets$"})
	if err != nil {
		t.Fatal(err)
	}
	<-g.started // alice's case is in its turn
	if _, err := svc.Start("alice", RunRequest{Assistant: "greeter"}); !errors.Is(err, ErrRunning) || !strings.Contains(err.Error(), a.ID()) {
		t.Errorf("a second run of alice = %v", err)
	}
	if _, err := svc.Get("bob", a.ID()); !errors.Is(err, ErrNoRun) {
		t.Errorf("bob finds alice's run: %v", err)
	}
	if info := a.Info(true); info.State != RunRunning || info.Total != 1 || info.Reports != nil {
		t.Errorf("running = %+v", info)
	}
	a.Cancel()
	for {
		_, over, more := a.Events(0)
		if over {
			break
		}
		<-more
	}
	info := a.Info(true)
	if info.State != RunCanceled || len(info.Reports) != 1 {
		t.Fatalf("canceled run = %+v", info)
	}
	if r := info.Reports[0].Results[0]; r.Status != StatusError || !strings.Contains(r.Error, "canceled") {
		t.Errorf("the canceled case = %s %q", r.Status, r.Error)
	}

	close(g.gate) // the next turns go through
	b, err := svc.Start("alice", RunRequest{Assistant: "flaky", Runs: 2})
	if err != nil {
		t.Fatal(err)
	}
	var events []*Event
	for {
		var over bool
		var more <-chan struct{}
		events, over, more = b.Events(0)
		if over {
			break
		}
		<-more
	}
	if last := events[len(events)-1]; last.Type != EventDone || last.Done != 4 || last.Failed != 1 {
		t.Errorf("last event = %+v", last)
	}
	if info := b.Info(false); info.State != RunDone || !info.Failing || info.Reports != nil || info.Summary.Failed != 1 {
		t.Errorf("done run = %+v", info)
	}
	if runs := svc.Runs("alice"); len(runs) != 2 || runs[0] != b {
		t.Errorf("alice's runs = %v", runs)
	}
	if _, err := svc.Start("bob", RunRequest{Assistant: "tests.judge"}); !errors.Is(err, ErrNoTests) {
		t.Errorf("no tests = %v", err)
	}
	if err := svc.Close(context.Background()); err != nil {
		t.Fatal(err)
	}
	if _, err := svc.Start("bob", RunRequest{Assistant: "greeter"}); !errors.Is(err, ErrServiceClosed) {
		t.Errorf("after Close = %v", err)
	}
}
