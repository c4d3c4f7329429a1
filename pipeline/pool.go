package pipeline

import (
	"context"
	"errors"
	"maps"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/agentbox/agentbox/assistant"
	"github.com/agentbox/agentbox/bridge"
	"github.com/agentbox/agentbox/executor"
	"github.com/agentbox/agentbox/sandbox"
)

// The warm pool keeps sandboxes of the assistants with sandbox.pool made
// ahead of demand (sandbox.Pooler), so that a new chat's first turn
// claims a running sandbox instead of waiting for one to start. A pooled
// sandbox is made for one assistant as it is loaded (a reloaded or
// changed assistant's are removed), hardened as any other, and serves
// one chat: a claimed sandbox never returns to the pool. One that fails
// its check on claim is removed, the turn creates its own, and the pool
// makes another.
//
// The pool fills in the background, one sandbox at a time, at most
// limits.pool.refill a second, only while a sandbox slot is free
// (limits.sandboxes), no turn waits for one and no new sandbox's turn is
// before its first text: running turns come first.
// It holds at most limits.pool.total sandboxes and limits.pool.memory,
// and only the room the kept chats leave under limits.kept_chats and
// limits.kept_memory.

// pooledMemoryEstimate is what a pooled sandbox counts for until it is
// measured: an idle container's init and sleep, with the engine's share.
const pooledMemoryEstimate = 16 << 20

// warmPool holds a pipeline's pooled sandboxes.
type warmPool struct {
	p *Pipeline

	mu      sync.Mutex
	ready   map[string][]*pooledSandbox // by assistant id, oldest first
	making  *assistant.Assistant        // the one being made, if any
	memory  int64
	refused map[*assistant.Assistant]error // cannot be pooled, and why
	// learned are the assistants' CLI requests their pooled sandboxes
	// prime (prime.go), from each one's last turn.
	learned map[*assistant.Assistant]*executor.Request
	started bool
	closed  bool
	// full: limits.pool.memory removed a pooled sandbox of app fullOf (its
	// sandboxes held more than the estimate it was made on, a primed
	// CLI's): none is made or primed until a claim or a reload, which
	// would only remove it again.
	full   bool
	fullOf *assistant.App

	// made, claimed, cold and dropped count since the start: sandboxes
	// made, claims served, new chats of pooled assistants that found the
	// pool empty, and pooled sandboxes removed on a failed claim.
	made, claimed, cold, dropped atomic.Int64

	wake   chan struct{}
	ctx    context.Context
	cancel context.CancelFunc
	wg     sync.WaitGroup
}

// pooledSandbox is one sandbox of the pool.
type pooledSandbox struct {
	assistant *assistant.Assistant
	runtime   string
	sb        sandbox.Pooled
	memory    int64
	// primed is the assistant's CLI started in the sandbox (prime.go),
	// with the model token in its environment and the sandbox environment
	// it was started with; nil when it waits without its CLI. tried: its
	// start was tried.
	primed *primedCLI
	tried  bool
}

func newWarmPool(p *Pipeline) *warmPool {
	ctx, cancel := context.WithCancel(context.Background())
	return &warmPool{p: p, ready: map[string][]*pooledSandbox{}, refused: map[*assistant.Assistant]error{},
		learned: map[*assistant.Assistant]*executor.Request{}, wake: make(chan struct{}, 1), ctx: ctx, cancel: cancel}
}

// StartPool starts filling the warm pool of the assistants with
// sandbox.pool, in the background until Close. A server calls it once;
// a pipeline that serves one turn (agentbox run) does not.
func (p *Pipeline) StartPool() {
	w := p.pool
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.started || w.closed {
		return
	}
	w.started = true
	w.wg.Go(w.run)
}

// poke wakes the refill loop.
func (w *warmPool) poke() {
	select {
	case w.wake <- struct{}{}:
	default:
	}
}

// run refills the pool whenever it is poked, and every second (a slot
// that became free, a kept chat that stopped).
func (w *warmPool) run() {
	tick := time.NewTicker(time.Second)
	defer tick.Stop()
	for {
		w.refill()
		select {
		case <-w.ctx.Done():
			return
		case <-w.wake:
		case <-tick.C:
		}
	}
}

// refill makes pooled sandboxes, one at a time and at most
// limits.pool.refill a second, until the pool is full or has no room.
func (w *warmPool) refill() {
	for w.ctx.Err() == nil {
		app := w.p.App()
		lim := limits(app)
		w.trim(app, lim)
		// Running turns first: only a free slot, none waiting, and no
		// new sandbox's CLI starting.
		release, ok := w.p.slots.tryAcquire(lim.Sandboxes)
		if !ok || w.p.waits.Load() > 0 || w.p.starting.Load() > 0 {
			if ok {
				release()
			}
			return
		}
		start := time.Now()
		// A pooled sandbox waiting without its CLI gets it first.
		if !w.primeReady(app) {
			a := w.wanted(app, lim)
			if a == nil {
				release()
				return
			}
			ps, err := w.make(app, a)
			release()
			w.done(ps)
			if err != nil {
				// Refused: not tried again for this definition. Failed:
				// tried again at the next tick.
				if errors.Is(err, errRefused) {
					continue
				}
				return
			}
		} else {
			release()
		}
		select {
		case <-w.ctx.Done():
			return
		case <-time.After(time.Second/time.Duration(lim.Pool.Refill) - time.Since(start)):
		}
	}
}

// wanted picks the assistant whose pool is furthest below its size, if
// there is room, and marks it being made.
func (w *warmPool) wanted(app *assistant.App, lim assistant.Limits) *assistant.Assistant {
	k := w.p.kept
	k.mu.Lock()
	keptCount, keptMemory, keptMax, keptMaxMemory := k.count, k.memory, k.maxCount, k.maxMemory
	k.mu.Unlock()
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.closed || w.making != nil || w.fullLocked(app) {
		return nil
	}
	total := w.countLocked()
	switch {
	case total >= lim.Pool.Total, keptCount+total >= keptMax,
		lim.Pool.Memory > 0 && w.memory+pooledMemoryEstimate > lim.Pool.Memory,
		keptMaxMemory > 0 && keptMemory+w.memory+pooledMemoryEstimate > keptMaxMemory:
		return nil
	}
	var best *assistant.Assistant
	gap := 0
	for _, id := range slices.Sorted(maps.Keys(app.Assistants)) {
		a := app.Assistants[id]
		if a.Sandbox == nil || a.Sandbox.Pool == 0 || w.refused[a] != nil {
			continue
		}
		if g := a.Sandbox.Pool - len(w.ready[id]); g > gap {
			best, gap = a, g
		}
	}
	w.making = best
	return best
}

// done ends the making of a pooled sandbox and adds ps, if any.
func (w *warmPool) done(ps *pooledSandbox) {
	w.mu.Lock()
	w.making = nil
	if ps != nil && !w.closed && w.p.App().Assistants[ps.assistant.ID] == ps.assistant {
		w.ready[ps.assistant.ID] = append(w.ready[ps.assistant.ID], ps)
		w.memory += ps.memory
		ps = nil
	}
	w.mu.Unlock()
	w.p.metrics.poolReady(w.status())
	if ps != nil { // closed or reloaded meanwhile
		w.remove(ps)
	}
}

// make makes one pooled sandbox of a. An assistant whose sandboxes cannot
// be pooled is remembered with the reason (logged once, shown in health).
func (w *warmPool) make(app *assistant.App, a *assistant.Assistant) (*pooledSandbox, error) {
	p := w.p
	rt, name, err := p.runtimeFor(app, a)
	if err != nil {
		return nil, w.refuse(a, err)
	}
	pooler, ok := rt.(sandbox.Pooler)
	if !ok {
		return nil, w.refuse(a, errors.New("its runtime "+name+" has no warm pool"))
	}
	mounts, err := p.pooledMounts(app, a, name)
	if err != nil {
		return nil, w.refuse(a, err)
	}
	spec := p.sandboxSpec(app, a, "", "", nil, mounts)
	ctx, cancel := context.WithTimeout(w.ctx, removeTimeout)
	defer cancel()
	sb, err := pooler.Prestart(ctx, spec)
	if err != nil {
		if errors.Is(err, sandbox.ErrNotPoolable) {
			return nil, w.refuse(a, err)
		}
		if w.ctx.Err() == nil {
			p.log.Warn("pooled sandbox not made", "assistant", a.ID, "error", err)
		}
		return nil, err
	}
	w.made.Add(1)
	ps := &pooledSandbox{assistant: a, runtime: name, sb: sb, memory: pooledMemoryEstimate}
	w.prime(ps)
	w.measure(ps)
	return ps, nil
}

// measure counts the memory ps holds now, where its runtime measures it.
func (w *warmPool) measure(ps *pooledSandbox) {
	m, ok := ps.sb.(memoryMeter)
	if !ok {
		return
	}
	ctx, cancel := context.WithTimeout(w.ctx, memoryMeasureTimeout)
	defer cancel()
	if n, err := m.MemoryUsage(ctx); err == nil && n > 0 {
		ps.memory = n
	}
}

// pooledMounts are the mounts a's sandboxes have before their chat's: the
// runtime's and the bridge's binary. The bridge's sockets come at claim.
func (p *Pipeline) pooledMounts(app *assistant.App, a *assistant.Assistant, runtime string) ([]sandbox.Mount, error) {
	mounts := slices.Clone(p.cfg.RuntimeMounts[runtime])
	if cfg := p.cfg.Bridge; cfg != nil {
		if cfg.Gateways[runtime] != nil {
			return nil, errors.New("its sandboxes reach the bridge over the network, which the pool does not attach")
		}
		bin, err := bridge.BinaryMount(bridge.Options{Dir: cfg.Dir, Binary: cfg.Binary, ReadableBinary: readableBinary(app, a)})
		if err != nil {
			return nil, err
		}
		mounts = append(mounts, bin)
	}
	return mounts, nil
}

// errRefused marks the error of make for an assistant whose sandboxes
// cannot be pooled.
var errRefused = errors.New("not pooled")

func (w *warmPool) refuse(a *assistant.Assistant, err error) error {
	w.mu.Lock()
	first := w.refused[a] == nil
	w.refused[a] = err
	w.mu.Unlock()
	if first {
		w.p.log.Warn("assistant's sandboxes are not pooled: its new chats start them", "assistant", a.ID, "reason", err)
	}
	return errors.Join(errRefused, err)
}

// claim gives a new chat of a one of its pooled sandboxes, attached to
// spec (the chat's workspace, bridge and environment), and the CLI
// primed in it, if any. It returns nil when the pool has none for a (the
// caller creates one), and removes a pooled sandbox that fails its
// check, trying the next.
func (w *warmPool) claim(ctx context.Context, a *assistant.Assistant, runtime string, spec sandbox.Spec) (sandbox.Sandbox, *primedCLI) {
	if a.Sandbox.Pool == 0 {
		return nil, nil
	}
	defer w.poke()
	for {
		ps := w.take(a, runtime)
		if ps == nil {
			w.cold.Add(1)
			w.p.metrics.poolClaim("cold")
			return nil, nil
		}
		sb, err := ps.sb.Claim(ctx, spec)
		if err == nil {
			w.claimed.Add(1)
			w.p.metrics.poolClaim("warm")
			return sb, ps.primed
		}
		w.dropped.Add(1)
		w.p.metrics.poolClaim("dropped")
		w.p.log.Warn("pooled sandbox dropped: its claim failed", "assistant", a.ID, "sandbox", ps.sb.ID(), "error", err)
		go w.remove(ps)
		if ctx.Err() != nil || errors.Is(err, sandbox.ErrNotPoolable) {
			return nil, nil
		}
	}
}

// has reports whether the pool holds a sandbox made for a (this
// definition, on runtime) now.
func (w *warmPool) has(a *assistant.Assistant, runtime string) bool {
	if a.Sandbox.Pool == 0 {
		return false
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	return slices.ContainsFunc(w.ready[a.ID], func(ps *pooledSandbox) bool { return ps.assistant == a && ps.runtime == runtime })
}

// fullLocked reports whether limits.pool.memory stopped the pool of app
// (full); w.mu is held.
func (w *warmPool) fullLocked(app *assistant.App) bool {
	return w.full && w.fullOf == app
}

// take takes the oldest pooled sandbox made for a (this definition, on
// runtime) out of the pool: a claim, which makes room.
func (w *warmPool) take(a *assistant.Assistant, runtime string) *pooledSandbox {
	w.mu.Lock()
	w.full = false
	defer func() {
		w.mu.Unlock()
		w.p.metrics.poolReady(w.status())
	}()
	list := w.ready[a.ID]
	for i, ps := range list {
		if ps.assistant == a && ps.runtime == runtime {
			w.ready[a.ID] = slices.Delete(list, i, i+1)
			w.memory -= ps.memory
			return ps
		}
	}
	return nil
}

// trim removes the pooled sandboxes of assistants app changed or dropped
// (or whose pool shrank), and the newest while the pool holds more than
// its caps allow.
func (w *warmPool) trim(app *assistant.App, lim assistant.Limits) {
	k := w.p.kept
	k.mu.Lock()
	keptCount, keptMax := k.count, k.maxCount
	k.mu.Unlock()
	var out []*pooledSandbox
	w.mu.Lock()
	for id, list := range w.ready {
		a := app.Assistants[id]
		keep := list[:0]
		for _, ps := range list {
			if ps.assistant != a || len(keep) >= a.Sandbox.Pool {
				out = append(out, ps)
				w.memory -= ps.memory
				continue
			}
			keep = append(keep, ps)
		}
		w.ready[id] = keep
	}
	for a := range w.refused {
		if app.Assistants[a.ID] != a {
			delete(w.refused, a)
		}
	}
	for a := range w.learned {
		if app.Assistants[a.ID] != a {
			delete(w.learned, a)
		}
	}
	for _, id := range slices.Sorted(maps.Keys(w.ready)) {
		for len(w.ready[id]) > 0 && (w.countLocked() > lim.Pool.Total || keptCount+w.countLocked() > keptMax ||
			lim.Pool.Memory > 0 && w.memory > lim.Pool.Memory) {
			if lim.Pool.Memory > 0 && w.memory > lim.Pool.Memory {
				w.full, w.fullOf = true, app
			}
			list := w.ready[id]
			ps := list[len(list)-1]
			w.ready[id] = list[:len(list)-1]
			w.memory -= ps.memory
			out = append(out, ps)
		}
	}
	w.mu.Unlock()
	if len(out) > 0 {
		w.p.metrics.poolReady(w.status())
	}
	for _, ps := range out {
		w.remove(ps)
	}
}

func (w *warmPool) countLocked() int {
	n := 0
	for _, list := range w.ready {
		n += len(list)
	}
	if w.making != nil {
		n++
	}
	return n
}

// remove removes a pooled sandbox, its primed CLI first, within its own
// timeout.
func (w *warmPool) remove(ps *pooledSandbox) {
	ps.primed.close()
	ctx, cancel := context.WithTimeout(context.Background(), removeTimeout)
	defer cancel()
	if err := ps.sb.Remove(ctx); err != nil {
		w.p.log.Error("pooled sandbox not removed", "assistant", ps.assistant.ID, "sandbox", ps.sb.ID(), "error", err)
	}
}

// close stops the refill and removes every pooled sandbox, in parallel.
func (w *warmPool) close() {
	w.mu.Lock()
	w.closed = true
	w.mu.Unlock()
	w.cancel()
	w.wg.Wait()
	w.mu.Lock()
	var all []*pooledSandbox
	for id, list := range w.ready {
		all = append(all, list...)
		delete(w.ready, id)
	}
	w.memory = 0
	w.mu.Unlock()
	var wg sync.WaitGroup
	for _, ps := range all {
		wg.Go(func() { w.remove(ps) })
	}
	wg.Wait()
	w.p.metrics.poolReady(w.status())
}

// PoolStatus is the warm pool as GET /health shows it.
type PoolStatus struct {
	// Ready counts the pooled sandboxes waiting for a chat; Target what
	// the assistants ask for (sandbox.pool, added up); MemoryBytes what
	// the ready ones hold.
	Ready int `json:"ready"`
	// Primed counts the ready ones whose CLI is started (prime.go).
	Primed      int   `json:"primed"`
	Target      int   `json:"target"`
	MemoryBytes int64 `json:"memory_bytes"`
	// Made, Claimed, Cold and Dropped count since the start: sandboxes
	// made, new chats that claimed one, new chats of pooled assistants
	// that found none, and pooled sandboxes removed when their claim
	// failed.
	Made    int64 `json:"made"`
	Claimed int64 `json:"claimed"`
	Cold    int64 `json:"cold"`
	Dropped int64 `json:"dropped"`
	// Assistants are the assistants with sandbox.pool, sorted by id.
	Assistants []PoolAssistant `json:"assistants,omitempty"`
}

// PoolAssistant is one assistant's share of the warm pool.
type PoolAssistant struct {
	ID     string `json:"id"`
	Ready  int    `json:"ready"`
	Primed int    `json:"primed"`
	Target int    `json:"target"`
	// Refused says why its sandboxes are not pooled ("" while they are).
	Refused string `json:"refused,omitempty"`
}

// Pool reports the warm pool.
func (p *Pipeline) Pool() PoolStatus { return p.pool.status() }

func (w *warmPool) status() PoolStatus {
	app := w.p.App()
	w.mu.Lock()
	defer w.mu.Unlock()
	st := PoolStatus{MemoryBytes: w.memory, Made: w.made.Load(), Claimed: w.claimed.Load(), Cold: w.cold.Load(), Dropped: w.dropped.Load()}
	for _, id := range slices.Sorted(maps.Keys(app.Assistants)) {
		a := app.Assistants[id]
		if a.Sandbox == nil || a.Sandbox.Pool == 0 {
			continue
		}
		pa := PoolAssistant{ID: id, Ready: len(w.ready[id]), Target: a.Sandbox.Pool}
		for _, ps := range w.ready[id] {
			if ps.primed != nil {
				pa.Primed++
			}
		}
		if err := w.refused[a]; err != nil {
			pa.Refused = err.Error()
		}
		st.Ready += pa.Ready
		st.Primed += pa.Primed
		st.Target += pa.Target
		st.Assistants = append(st.Assistants, pa)
	}
	return st
}
