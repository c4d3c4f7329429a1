package jsapi

import (
	"context"
	"fmt"
	"slices"
	"strings"

	"github.com/dop251/goja"

	"github.com/agentbox/agentbox/chat"
)

// Fan-out modes of All, Any and Race (ctx.agent, ctx.llm).
const (
	fanAll  = "all"  // wait for every call
	fanAny  = "any"  // stop the others once one succeeds
	fanRace = "race" // stop the others once one ends
)

// fanOut is what a batch of host calls made at once from a hook needs:
// run does call i on a goroutine of its own and gives its result (failed
// for a result Any keeps waiting past); chunk, when call i wants its
// events in the hook, is handed them. onChunk runs on the hook's
// goroutine while it waits; a non-zero return stops call i.
type fanOut struct {
	fn      string
	mode    string
	n       int
	wants   func(i int) bool
	run     func(ctx context.Context, i int, chunk chat.EmitFunc) (res any, failed bool)
	onChunk func(i int, e chat.Event) (goja.Value, error)
}

// fanResult is one call's result, in the order the calls ended.
type fanResult struct {
	idx    int
	res    any
	failed bool
}

// fan runs f's calls at once, bounded by the hook's context, and returns
// the results it kept in the order they ended: every call's for All, up
// to the first success for Any, the first for Race (the calls still
// running then are canceled and their results dropped). When the hook's
// time runs out while it waits, the calls are stopped and the hook
// throws.
func (c *call) fan(f fanOut) []fanResult {
	if err := c.ctx.Err(); err != nil {
		c.throw(fmt.Errorf("%s: %w", f.fn, err), "")
	}
	if f.n == 0 {
		return nil
	}
	cancels := make([]context.CancelFunc, f.n)
	done := make(chan fanResult, f.n)
	chunks := make(chan chunk)
	stop := make(chan struct{})
	defer close(stop)
	for i := range f.n {
		ctx, cancel := context.WithCancel(c.ctx)
		cancels[i] = cancel
		var emit chat.EmitFunc
		if f.wants != nil && f.wants(i) {
			emit = func(e chat.Event) {
				select {
				case chunks <- chunk{idx: i, e: e}:
				case <-ctx.Done():
				case <-stop:
				}
			}
		}
		go func() {
			res, failed := f.run(ctx, i, emit)
			done <- fanResult{idx: i, res: res, failed: failed}
		}()
	}
	var out []fanResult
	finished := make([]bool, f.n)
	over := false // race or any decided: later results are dropped
	for left := f.n; left > 0; {
		select {
		case d := <-done:
			left--
			finished[d.idx] = true
			cancels[d.idx]()
			if over {
				continue
			}
			out = append(out, d)
			if f.mode == fanRace || f.mode == fanAny && !d.failed {
				over = true
				for j := range cancels {
					if !finished[j] {
						cancels[j]()
					}
				}
			}
		case ch := <-chunks:
			if over || finished[ch.idx] {
				continue
			}
			ret, err := f.onChunk(ch.idx, ch.e)
			if err != nil {
				for j := range cancels {
					cancels[j]()
				}
				// Wait for the calls before the error leaves the hook.
				for ; left > 0; left-- {
					<-done
				}
				panic(err)
			}
			if ret != nil && ret.ToInteger() != 0 {
				cancels[ch.idx]()
			}
		}
	}
	if err := c.ctx.Err(); err != nil {
		// The hook's time ran out while it waited: its calls were ended
		// with it, and so is the hook.
		why := "the request ended"
		if c.timedOut() {
			why = fmt.Sprintf("the hook ran past its timeout of %s (hooks.timeout bounds the calls it makes)", c.h.timeout)
		}
		c.throw(fmt.Errorf("%s: the calls were stopped: %s: %w", f.fn, why, err), "")
	}
	return out
}

// chunk is an event of call idx for its onChunk callback.
type chunk struct {
	idx int
	e   chat.Event
}

// batchOnChunk parses the options argument of All, Any and Race: {onChunk?}.
func (c *call) batchOnChunk(fn string, opts goja.Value, sig string) goja.Callable {
	if isNullish(opts) {
		return nil
	}
	if !isPlainObject(opts) {
		c.throw(argErr("%s: options: want {onChunk?}, got %s", fn, typeName(opts)), "")
	}
	var onChunk goja.Callable
	for _, k := range opts.(*goja.Object).Keys() {
		v := opts.(*goja.Object).Get(k)
		if isNullish(v) {
			continue
		}
		f, isFn := goja.AssertFunction(v)
		if k != "onChunk" || !isFn {
			c.throw(argErr("%s: options: want only onChunk, a function %s => number", fn, sig), "")
		}
		onChunk = f
	}
	return onChunk
}

// requestArray checks the requests argument of All, Any and Race and
// returns its elements (at most MaxFanOut).
func (c *call) requestArray(fn string, v goja.Value, shape string) []*goja.Object {
	o, ok := v.(*goja.Object)
	if !ok || o.ClassName() != "Array" {
		c.throw(argErr("%s: want an array of requests %s, got %s", fn, shape, typeName(v)), "")
	}
	n := int(o.Get("length").ToInteger())
	if n > MaxFanOut {
		c.throw(argErr("%s: %d requests, at most %d run at once", fn, n, MaxFanOut), "")
	}
	out := make([]*goja.Object, n)
	for i := range n {
		e := o.Get(fmt.Sprint(i))
		if !isPlainObject(e) {
			c.throw(argErr("%s: requests[%d]: want %s, got %s", fn, i, shape, typeName(e)), "")
		}
		out[i] = e.(*goja.Object)
	}
	return out
}

// knownKeys throws for a field of o not in keys.
func (c *call) knownKeys(at string, o *goja.Object, keys []string) {
	for _, k := range o.Keys() {
		if !slices.Contains(keys, k) {
			c.throw(argErr("%s: unknown field %q (want %s)", at, k, strings.Join(keys, ", ")), "")
		}
	}
}
