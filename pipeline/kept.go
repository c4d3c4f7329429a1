package pipeline

import (
	"container/list"
	"context"
	"sync"
	"sync/atomic"
	"time"

	"github.com/agentbox/agentbox/assistant"
	"github.com/agentbox/agentbox/bridge"
	"github.com/agentbox/agentbox/chat"
	"github.com/agentbox/agentbox/executor"
	"github.com/agentbox/agentbox/jsapi"
	"github.com/agentbox/agentbox/sandbox"
)

// keptChat is a chat's sandbox and CLI kept running between its turns
// (sandbox.keep_alive). While a turn runs on it, it is out of the idle
// list; between turns it waits there until its keep_alive passes, the
// caps stop it (least recently used first) or its next turn takes it.
type keptChat struct {
	key, user, chat string
	// assistant is the definition it was started for: a reloaded or
	// changed assistant is a new pointer, and the chat restarts.
	assistant *assistant.Assistant
	sb        sandbox.Sandbox
	bridge    *bridge.Session
	cli       executor.Warm
	// hookCtx is what the bridge's host tools run with: each turn points
	// it at its own hook context.
	hookCtx *atomic.Pointer[jsapi.Context]
	// cur is the turn the bridge's own tools (propose_skill) serve.
	cur *atomic.Pointer[turn]
	// remove stops the CLI's sandbox, closes its bridge and releases its
	// workspace (once).
	remove func()
	// memory is what it counts against limits.kept_memory: the memory it
	// holds, measured at the end of each turn and every measureEvery while
	// idle when the runtime can tell (memoryMeter), else its memory limit.
	memory    int64
	counted   bool // k.mu; it counts in keptChats.count and memory
	keepAlive time.Duration
	// usage and egress are what the bridge metered up to the end of the
	// previous turn: a turn reports only its own share.
	usage  chat.Usage
	egress []chat.HostUsage

	elem  *list.Element // in keptChats.idle while idle
	timer *time.Timer
	// freezeTimer freezes it once idle for keptChats.freezeAfter (nil:
	// its sandbox cannot be frozen).
	freezeTimer *time.Timer
	// serves is set when its sandbox serves previews of its ports: it is
	// never frozen, as its servers must answer between turns.
	serves bool
	// freezeMu orders a freeze and the thaw of the turn that takes it;
	// frozen is whether its sandbox is frozen now (freezeMu).
	freezeMu sync.Mutex
	frozen   bool
	// idleWatch ends the watch on its workspace between turns, where the
	// disk limit is measured (nil: none; Pipeline.watchIdle).
	idleWatch func()
}

// freeze freezes c's sandbox, if c is still idle and not frozen: its
// CLI and whatever the agent left running cost no CPU until its next
// turn thaws it.
func (k *keptChats) freeze(c *keptChat) {
	c.freezeMu.Lock()
	defer c.freezeMu.Unlock()
	k.mu.Lock()
	idle := c.elem != nil && k.byKey[c.key] == c
	k.mu.Unlock()
	f, ok := c.sb.(sandbox.Freezer)
	if !idle || c.frozen || !ok {
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), freezeTimeout)
	defer cancel()
	// Frozen, or maybe: a failed pause may have paused it all the same,
	// and a chat left paused would hang its next turn. The thaw of that
	// turn unpauses it, and a thaw that fails stops the kept chat (the
	// turn starts a new sandbox).
	_ = f.Freeze(ctx)
	c.frozen = true
}

// thaw thaws c's sandbox if it is frozen (a turn took c, or c stops).
func (c *keptChat) thaw() error {
	c.freezeMu.Lock()
	defer c.freezeMu.Unlock()
	if !c.frozen {
		return nil
	}
	ctx, cancel := context.WithTimeout(context.Background(), freezeTimeout)
	defer cancel()
	if err := c.sb.(sandbox.Freezer).Thaw(ctx); err != nil {
		return err
	}
	c.frozen = false
	return nil
}

// keptFreezeAfter is how long a kept chat idles before its sandbox is
// frozen: past the end of its turn's work (the CLI writes the end of its
// transcript after the answer, the checkpoint reads it), short enough
// that an idle chat costs no CPU for most of its keep_alive.
const keptFreezeAfter = 5 * time.Second

// freezeTimeout bounds a freeze or a thaw.
const freezeTimeout = 10 * time.Second

// endIdleWatch ends the watch on c's workspace between turns, if any:
// when a turn takes c, or before c stops.
func (c *keptChat) endIdleWatch() {
	if c.idleWatch != nil {
		c.idleWatch()
		c.idleWatch = nil
	}
}

// keptChats holds the kept chats of a pipeline.
type keptChats struct {
	mu        sync.Mutex
	idle      *list.List // of *keptChat, least recently used first
	byKey     map[string]*keptChat
	count     int   // kept chats, idle or running a turn
	memory    int64 // their memory limits, added up
	maxCount  int
	maxMemory int64
	closed    bool
	// freezeAfter is how long an idle chat waits before it is frozen
	// (0: never).
	freezeAfter time.Duration
	// measureEvery is how often the idle chats are measured; metering is
	// set while a meter runs (Pipeline.meterKept); closing meterDone ends it.
	measureEvery time.Duration
	metering     bool
	stopped      bool
	meterDone    chan struct{}
}

// keptMeasureInterval is how often the memory of idle kept chats is
// measured: a chat that grows between its turns (a process the agent left
// running) counts at what it holds within this time.
const keptMeasureInterval = 10 * time.Second

func newKeptChats() *keptChats {
	lim := assistant.DefaultLimits()
	k := &keptChats{idle: list.New(), byKey: map[string]*keptChat{}, measureEvery: keptMeasureInterval, meterDone: make(chan struct{}),
		freezeAfter: keptFreezeAfter}
	k.setCaps(lim, hostMemory())
	return k
}

// setCaps sets the caps from the app's limits: limits.kept_memory in
// bytes, or its share of host (the host's memory; 0: unknown, no memory
// cap).
func (k *keptChats) setCaps(lim assistant.Limits, host int64) {
	mem := lim.KeptMemory
	if mem <= 0 {
		mem = int64(lim.KeptMemoryShare * float64(host))
	}
	k.mu.Lock()
	k.maxCount, k.maxMemory = lim.KeptChats, mem
	k.mu.Unlock()
}

// resize counts c at memory bytes from now on, unless it stopped.
func (k *keptChats) resize(c *keptChat, memory int64) {
	k.mu.Lock()
	if c.counted {
		k.memory += memory - c.memory
		c.memory = memory
	}
	k.mu.Unlock()
}

// uncount stops counting c (k.mu held).
func (k *keptChats) uncount(c *keptChat) {
	if c.counted {
		c.counted = false
		k.count--
		k.memory -= c.memory
	}
}

func keptKey(user, chatID string) string { return user + "\x00" + chatID }

// take returns the chat's kept sandbox, out of the idle list (nil: none).
func (k *keptChats) take(user, chatID string) *keptChat {
	k.mu.Lock()
	defer k.mu.Unlock()
	c := k.byKey[keptKey(user, chatID)]
	if c == nil {
		return nil
	}
	delete(k.byKey, c.key)
	k.idle.Remove(c.elem)
	c.elem = nil
	c.stopTimers()
	return c
}

// stopTimers stops c's keep_alive and freeze timers (k.mu held).
func (c *keptChat) stopTimers() {
	c.timer.Stop()
	if c.freezeTimer != nil {
		c.freezeTimer.Stop()
	}
}

// admit counts a new kept chat (its sandbox created for keeping).
func (k *keptChats) admit(c *keptChat) {
	k.mu.Lock()
	k.count++
	k.memory += c.memory
	c.counted = true
	k.mu.Unlock()
}

// drop stops c (not in the idle list) and uncounts it.
func (k *keptChats) drop(c *keptChat) {
	k.mu.Lock()
	k.uncount(c)
	k.mu.Unlock()
	k.stop(c)
}

// put returns c to the idle list after a turn; it stops after its
// keep_alive. Over the caps, the least recently used idle chats stop
// (c last).
func (k *keptChats) put(c *keptChat) {
	k.mu.Lock()
	if k.closed {
		k.mu.Unlock()
		k.drop(c)
		return
	}
	c.elem = k.idle.PushBack(c)
	k.byKey[c.key] = c
	c.timer = time.AfterFunc(c.keepAlive, func() { k.expire(c) })
	c.freezeTimer = nil
	if _, ok := c.sb.(sandbox.Freezer); ok && !c.serves && k.freezeAfter > 0 && k.freezeAfter < c.keepAlive {
		c.freezeTimer = time.AfterFunc(k.freezeAfter, func() { k.freeze(c) })
	}
	k.mu.Unlock()
	k.trim()
}

// takeIf takes the idle kept chats match says yes to out of the idle
// list (still counted: drop them).
func (k *keptChats) takeIf(match func(*keptChat) bool) []*keptChat {
	k.mu.Lock()
	defer k.mu.Unlock()
	var out []*keptChat
	for e := k.idle.Front(); e != nil; {
		next := e.Next()
		if c := e.Value.(*keptChat); match(c) {
			k.unlink(c)
			out = append(out, c)
		}
		e = next
	}
	return out
}

// trim stops the least recently used idle chats while the kept ones are
// over the caps.
func (k *keptChats) trim() {
	k.mu.Lock()
	var evict []*keptChat
	for k.idle.Len() > 0 && (k.count > k.maxCount || (k.maxMemory > 0 && k.memory > k.maxMemory)) {
		old := k.idle.Front().Value.(*keptChat)
		k.unlink(old)
		k.uncount(old)
		evict = append(evict, old)
	}
	k.mu.Unlock()
	for _, old := range evict {
		go k.stop(old)
	}
}

// unlink takes c out of the idle list (k.mu held).
func (k *keptChats) unlink(c *keptChat) {
	k.idle.Remove(c.elem)
	c.elem = nil
	delete(k.byKey, c.key)
	c.stopTimers()
}

// expire stops an idle c: its keep_alive passed, or its workspace grew
// past its limit, and no turn took it meanwhile.
func (k *keptChats) expire(c *keptChat) {
	k.mu.Lock()
	if c.elem == nil || k.byKey[c.key] != c {
		k.mu.Unlock()
		return
	}
	k.unlink(c)
	k.uncount(c)
	k.mu.Unlock()
	k.stop(c)
}

// stop stops an uncounted c.
func (k *keptChats) stop(c *keptChat) {
	c.endIdleWatch()
	// A frozen CLI cannot end its session: thawed first (the removal
	// goes on if the thaw fails).
	_ = c.thaw()
	if c.cli != nil {
		c.cli.Close()
	}
	c.remove()
}

// startMeter reports whether a meter should start now (none runs, the
// kept chats are not closed), and marks it running.
func (k *keptChats) startMeter() bool {
	k.mu.Lock()
	defer k.mu.Unlock()
	if k.metering || k.stopped {
		return false
	}
	k.metering = true
	return true
}

// toMeasure returns the idle chats whose sandbox can be measured; when
// there is none it marks the meter stopped and returns nil.
func (k *keptChats) toMeasure() []*keptChat {
	k.mu.Lock()
	defer k.mu.Unlock()
	var out []*keptChat
	for e := k.idle.Front(); e != nil; e = e.Next() {
		if c := e.Value.(*keptChat); isMemoryMeter(c.sb) {
			out = append(out, c)
		}
	}
	if len(out) == 0 || k.stopped {
		k.metering = false
		return nil
	}
	return out
}

// stopMeter ends the meter (Close, before it waits for it).
func (k *keptChats) stopMeter() {
	k.mu.Lock()
	defer k.mu.Unlock()
	if !k.stopped {
		k.stopped = true
		close(k.meterDone)
	}
}

// closeAll stops every idle kept chat, in parallel, and makes put stop
// the ones still running a turn.
func (k *keptChats) closeAll() {
	k.stopMeter()
	k.mu.Lock()
	k.closed = true
	var all []*keptChat
	for k.idle.Len() > 0 {
		c := k.idle.Front().Value.(*keptChat)
		k.unlink(c)
		k.uncount(c)
		all = append(all, c)
	}
	k.mu.Unlock()
	var wg sync.WaitGroup
	for _, c := range all {
		wg.Go(func() { k.stop(c) })
	}
	wg.Wait()
}

// stats are the number of kept chats and of idle ones.
func (k *keptChats) stats() (kept, idle int) {
	k.mu.Lock()
	defer k.mu.Unlock()
	return k.count, k.idle.Len()
}

// subUsage is a - b for the metered token counts.
func subUsage(a, b chat.Usage) chat.Usage {
	a.InputTokens -= b.InputTokens
	a.OutputTokens -= b.OutputTokens
	a.CacheReadTokens -= b.CacheReadTokens
	a.CacheCreationTokens -= b.CacheCreationTokens
	a.ModelCalls -= b.ModelCalls
	return a
}

// subHostUsage is each host's traffic in a less its traffic in b.
func subHostUsage(a, b []chat.HostUsage) []chat.HostUsage {
	base := map[string]chat.HostUsage{}
	for _, u := range b {
		base[u.Host] = u
	}
	var out []chat.HostUsage
	for _, u := range a {
		o := base[u.Host]
		u.Requests -= o.Requests
		u.Denied -= o.Denied
		u.BytesSent -= o.BytesSent
		u.BytesReceived -= o.BytesReceived
		if u.Requests != 0 || u.Denied != 0 || u.BytesSent != 0 || u.BytesReceived != 0 {
			out = append(out, u)
		}
	}
	return out
}
