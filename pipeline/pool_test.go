package pipeline

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/agentbox/agentbox/assistant"
	"github.com/agentbox/agentbox/sandbox"
)

// fakePoolRuntime is a runtime whose sandboxes are only made ahead of
// demand: it counts them, and those removed.
type fakePoolRuntime struct {
	mu      sync.Mutex
	made    []*fakePooled
	removed int
}

func (r *fakePoolRuntime) Name() string { return "fake" }
func (r *fakePoolRuntime) Create(context.Context, sandbox.Spec) (sandbox.Sandbox, error) {
	return nil, errors.New("not in this test")
}
func (r *fakePoolRuntime) Close(context.Context) error { return nil }
func (r *fakePoolRuntime) Prestart(_ context.Context, spec sandbox.Spec) (sandbox.Pooled, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	fp := &fakePooled{rt: r, id: fmt.Sprintf("p%d", len(r.made)), spec: spec}
	r.made = append(r.made, fp)
	return fp, nil
}

type fakePooled struct {
	rt     *fakePoolRuntime
	id     string
	spec   sandbox.Spec
	broken bool
	claims int
}

// claimedSandbox stands for a claimed sandbox (never used as one here).
type claimedSandbox struct{ sandbox.Sandbox }

func (p *fakePooled) ID() string { return p.id }
func (p *fakePooled) Claim(context.Context, sandbox.Spec) (sandbox.Sandbox, error) {
	p.claims++
	if p.broken {
		return nil, errors.New("not running")
	}
	return claimedSandbox{}, nil
}
func (p *fakePooled) Remove(context.Context) error {
	p.rt.mu.Lock()
	p.rt.removed++
	p.rt.mu.Unlock()
	return nil
}

// TestWarmPool: the pool fills to the assistant's sandbox.pool within
// limits.pool.total, a claim takes the oldest and drops one that fails
// its check, a reloaded assistant's are replaced, Close removes the rest;
// an assistant whose runtime cannot pool is refused, once, and shown.
func TestWarmPool(t *testing.T) {
	ws, err := sandbox.NewWorkspaces(t.TempDir(), -1, -1)
	if err != nil {
		t.Fatal(err)
	}
	rt := &fakePoolRuntime{}
	coder := &assistant.Assistant{ID: "coder", Sandbox: &assistant.Sandbox{Command: "claude", Image: "img", Pool: 3}}
	lim := assistant.DefaultLimits()
	lim.Pool = assistant.PoolLimits{Total: 2, Refill: 100}
	app := &assistant.App{Config: &assistant.AppConfig{Limits: lim}, Assistants: map[string]*assistant.Assistant{"coder": coder}}
	src := &swapApp{}
	src.app.Store(app)
	p, err := New(Config{App: src, Runtimes: map[string]sandbox.Runtime{"fake": rt}, DefaultRuntime: "fake", Workspaces: ws})
	if err != nil {
		t.Fatal(err)
	}
	p.pool.refill()
	if st := p.Pool(); st.Ready != 2 || st.Target != 3 || st.Made != 2 {
		t.Fatalf("after refill: %+v, want 2 ready (limits.pool.total) of 3", st)
	}
	if img := rt.made[0].spec.Image; img != "img" || rt.made[0].spec.Workspace != nil {
		t.Errorf("prestart spec %+v", rt.made[0].spec)
	}

	// The oldest is claimed first; a broken one is dropped for the next.
	rt.made[0].broken = true
	if sb, _ := p.pool.claim(context.Background(), coder, "fake", sandbox.Spec{}); sb == nil {
		t.Fatal("no claim")
	}
	if rt.made[0].claims != 1 || rt.made[1].claims != 1 {
		t.Errorf("claims %d, %d: want the broken one, then the next", rt.made[0].claims, rt.made[1].claims)
	}
	if sb, _ := p.pool.claim(context.Background(), coder, "fake", sandbox.Spec{}); sb != nil {
		t.Error("claimed from an empty pool")
	}
	if st := p.Pool(); st.Claimed != 1 || st.Dropped != 1 || st.Cold != 1 || st.Ready != 0 {
		t.Errorf("after claims: %+v", st)
	}

	// A reloaded assistant's pooled sandboxes are replaced.
	p.pool.refill()
	changed := *coder
	next := *app
	next.Assistants = map[string]*assistant.Assistant{"coder": &changed}
	src.app.Store(&next)
	p.AppReloaded(&next)
	p.pool.refill()
	p.pool.mu.Lock()
	for _, ps := range p.pool.ready["coder"] {
		if ps.assistant != &changed {
			t.Errorf("pooled sandbox %s of the old definition kept", ps.sb.ID())
		}
	}
	p.pool.mu.Unlock()
	if st := p.Pool(); st.Ready != 2 {
		t.Errorf("after reload: %+v", st)
	}

	// An assistant on a runtime without a pool is refused and shown.
	other := &assistant.Assistant{ID: "other", Sandbox: &assistant.Sandbox{Command: "claude", Runtime: "none", Pool: 1}}
	next.Assistants["other"] = other
	lim.Pool.Total = 4
	next.Config = &assistant.AppConfig{Limits: lim}
	p.pool.refill()
	st := p.Pool()
	if len(st.Assistants) != 2 || st.Assistants[1].ID != "other" || st.Assistants[1].Refused == "" {
		t.Errorf("refused assistant not shown: %+v", st.Assistants)
	}

	if err := p.Close(context.Background()); err != nil {
		t.Fatal(err)
	}
	rt.mu.Lock()
	defer rt.mu.Unlock()
	if rt.removed != len(rt.made)-1 { // all but the one claimed
		t.Errorf("%d of %d pooled sandboxes removed after Close", rt.removed, len(rt.made))
	}
}

// meteredPooled is a fakePooled whose memory is measured as size.
type meteredPooled struct {
	*fakePooled
	size int64
}

func (p meteredPooled) MemoryUsage(context.Context) (int64, error) { return p.size, nil }

// meteredRuntime makes meteredPooled sandboxes of size bytes.
type meteredRuntime struct {
	fakePoolRuntime
	size int64
}

func (r *meteredRuntime) Prestart(ctx context.Context, spec sandbox.Spec) (sandbox.Pooled, error) {
	p, err := r.fakePoolRuntime.Prestart(ctx, spec)
	if err != nil {
		return nil, err
	}
	return meteredPooled{p.(*fakePooled), r.size}, nil
}

// TestWarmPoolMemoryCap: pooled sandboxes larger than the pool's estimate
// (a primed CLI's) fill limits.pool.memory once; the one past it is
// removed and the pool makes no more until a claim makes room, instead
// of making and removing sandboxes for ever.
func TestWarmPoolMemoryCap(t *testing.T) {
	ws, err := sandbox.NewWorkspaces(t.TempDir(), -1, -1)
	if err != nil {
		t.Fatal(err)
	}
	rt := &meteredRuntime{size: 200 << 20}
	coder := &assistant.Assistant{ID: "coder", Sandbox: &assistant.Sandbox{Command: "claude", Image: "img", Pool: 4}}
	lim := assistant.DefaultLimits()
	lim.Pool = assistant.PoolLimits{Total: 4, Refill: 100, Memory: 300 << 20}
	app := &assistant.App{Config: &assistant.AppConfig{Limits: lim}, Assistants: map[string]*assistant.Assistant{"coder": coder}}
	src := &swapApp{}
	src.app.Store(app)
	p, err := New(Config{App: src, Runtimes: map[string]sandbox.Runtime{"fake": rt}, DefaultRuntime: "fake", Workspaces: ws})
	if err != nil {
		t.Fatal(err)
	}
	defer p.Close(context.Background())
	done := make(chan struct{})
	go func() {
		defer close(done)
		p.pool.refill()
		p.pool.refill()
	}()
	select {
	case <-done:
	case <-time.After(time.Minute):
		p.pool.cancel()
		<-done
		t.Fatalf("the pool kept making sandboxes past its memory: %+v", p.Pool())
	}
	if st := p.Pool(); st.Ready != 1 || st.Made != 2 {
		t.Errorf("after refill: %+v, want 1 ready and 2 made (one removed past limits.pool.memory)", st)
	}
	// A claim makes room: the pool makes one more, and stops again.
	if sb, _ := p.pool.claim(context.Background(), coder, "fake", sandbox.Spec{}); sb == nil {
		t.Fatal("no claim")
	}
	p.pool.refill()
	if st := p.Pool(); st.Ready != 1 || st.Made != 4 {
		t.Errorf("after a claim and a refill: %+v, want 1 ready and 4 made", st)
	}
}
