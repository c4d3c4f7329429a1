package pipeline

import (
	"context"
	"time"

	"github.com/agentbox/agentbox/assistant"
	"github.com/agentbox/agentbox/sandbox"
)

// bridgeTurn bounds a kept chat's bridge (its model proxy and host tools)
// by this turn: its requests end with the turn's context or past the
// deadline a new chat's bridge gets, and none are served between turns.
func (t *turn) bridgeTurn(ctx context.Context, a *assistant.Assistant) (end func()) {
	if t.bridge == nil {
		return func() {}
	}
	var deadline time.Time
	if a.Sandbox.Timeout > 0 {
		deadline = time.Now().Add(a.Sandbox.Timeout + 2*a.HookTimeout + time.Minute)
	}
	return t.bridge.BeginTurn(ctx, deadline)
}

// keepOrDrop returns a kept chat to the idle list when its CLI is still
// up for the next turn, and stops it otherwise.
func (t *turn) keepOrDrop(c *keptChat) {
	if c.cli == nil || !c.cli.Alive() {
		start := time.Now()
		t.p.kept.drop(c)
		t.phase(phaseSandboxRemove, start)
		return
	}
	if c.bridge != nil {
		c.usage, c.egress = c.bridge.Usage(), c.bridge.EgressUsage()
	}
	// A changed or reloaded assistant's chat stops now, not at its next
	// message.
	if cur := t.p.App().Assistants[c.assistant.ID]; cur != c.assistant {
		t.p.kept.drop(c)
		return
	}
	t.p.kept.setCaps(limits(t.p.App()), hostMemory())
	t.p.watchIdle(c)
	t.p.kept.put(c)
	// Counted by what it holds idle, measured aside: a stats call can take
	// long on a busy engine, and the chat's next turn does not wait for it.
	if isMemoryMeter(c.sb) {
		t.p.measuring.Go(func() {
			t.p.measureKept(c)
			t.p.kept.trim()
		})
		if t.p.kept.startMeter() {
			t.p.measuring.Go(t.p.meterKept)
		}
	}
}

// meterKept measures the idle kept chats every keptChats.measureEvery and
// stops the least recently used while they hold more than the caps allow,
// until no idle chat can be measured or the pipeline closes: a kept chat
// is counted at what it holds now, not at what it held when its turn
// ended (a process the agent left running may grow meanwhile).
func (p *Pipeline) meterKept() {
	tick := time.NewTicker(p.kept.measureEvery)
	defer tick.Stop()
	for {
		select {
		case <-p.kept.meterDone:
			return
		case <-tick.C:
		}
		chats := p.kept.toMeasure()
		if chats == nil {
			return
		}
		for _, c := range chats {
			p.measureKept(c)
		}
		p.kept.trim()
	}
}

// measureKept counts c at the memory its sandbox holds now, when the
// runtime can tell.
func (p *Pipeline) measureKept(c *keptChat) {
	m, ok := c.sb.(memoryMeter)
	if !ok {
		return
	}
	start := time.Now()
	ctx, cancel := context.WithTimeout(context.Background(), memoryMeasureTimeout)
	n, err := m.MemoryUsage(ctx)
	cancel()
	if err == nil && n > 0 {
		p.kept.resize(c, n)
	}
	p.log.Debug("kept chat measured", "user", c.user, "chat", c.chat, "memory_bytes", n, "error", err, "took", time.Since(start))
}

// memoryMeter is a sandbox that can tell the memory it uses (docker).
type memoryMeter interface {
	MemoryUsage(ctx context.Context) (int64, error)
}

func isMemoryMeter(sb sandbox.Sandbox) bool {
	_, ok := sb.(memoryMeter)
	return ok
}

// watchIdle watches an idle kept chat's workspace where its limit is
// only measured: the processes the agent left running may write between
// turns. One that grows past its limit has its sandbox removed and what
// it wrote past the limit deleted (sandbox.Workspace.WatchDisk), and the
// chat stops being kept; its next turn starts a new sandbox.
func (p *Pipeline) watchIdle(c *keptChat) {
	ws := c.sb.Workspace()
	if d := ws.Disk(); d.Mode != sandbox.DiskWatch || d.Bytes <= 0 {
		return
	}
	c.idleWatch = ws.WatchDisk(context.Background(), c.sb.Remove, func(f sandbox.DiskFull) {
		p.log.Warn("kept chat stopped: its workspace grew past its limit between turns", "user", c.user, "chat", c.chat, "message", f.Message())
		go p.kept.expire(c)
	})
}

// memoryMeasureTimeout bounds measuring a kept chat's memory.
const memoryMeasureTimeout = 5 * time.Second

// AppReloaded stops the idle kept chats of assistants app changed or
// dropped (a kept chat running a turn stops when its turn ends), and
// applies app's caps. The server calls it after each reload.
func (p *Pipeline) AppReloaded(app *assistant.App) {
	p.kept.setCaps(limits(app), hostMemory())
	for _, c := range p.kept.takeIf(func(c *keptChat) bool { return app.Assistants[c.assistant.ID] != c.assistant }) {
		p.log.Info("kept chat stopped: its assistant was reloaded", "user", c.user, "chat", c.chat, "assistant", c.assistant.ID)
		go p.kept.drop(c)
	}
	p.kept.trim()
	p.pool.poke()
}
