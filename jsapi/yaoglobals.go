package jsapi

import (
	"context"
	"errors"
	"regexp"
	"strings"
	"sync"
	"time"

	"github.com/dop251/goja"
)

// The small globals of Yao's script runtime that agentbox implements
// (gou runtime/v8/functions and objects): time.Sleep, $L, Authorized,
// Eval, Use, and All, Any and Race, which run processes at once. Process is
// in process.go; log's Yao members in log.go.

// maxConcurrentTasks bounds the processes All, Any and Race run at once;
// the others wait for a slot.
const maxConcurrentTasks = 8

// timeObject is Yao's time: Sleep(ms) waits, within the call's deadline;
// After (a process run later, outside the request) is Yao-only.
func (c *call) timeObject() goja.Value {
	return c.newLazy(yaoMembers["time"], func(member string) goja.Value {
		switch member {
		case "Sleep":
			return c.vm.ToValue(nativeFn(c.sleep))
		}
		return c.vm.ToValue(nativeFn(func(goja.FunctionCall) goja.Value {
			c.throw(&hostError{code: CodeYaoOnly, msg: "time." + member + " is Yao-only: it runs a process later, outside the request; call Process now instead"}, CodeYaoOnly)
			return nil
		}))
	})
}

// sleep is time.Sleep(ms): the hook waits, and stops when its deadline or
// the request ends.
func (c *call) sleep(fc goja.FunctionCall) goja.Value {
	if len(fc.Arguments) == 0 {
		c.throw(argErr("time.Sleep: missing parameters: want the milliseconds to wait"), "")
	}
	ms := fc.Argument(0).ToInteger()
	if ms <= 0 {
		return goja.Null()
	}
	t := time.NewTimer(time.Duration(ms) * time.Millisecond)
	defer t.Stop()
	select {
	case <-t.C:
		return goja.Null()
	case <-c.ctx.Done():
		c.throw(c.ctx.Err(), CodeHookTimeout)
		return nil
	}
}

// lang is Yao's $L(text): text with a leading "::" removed. Yao then
// translates it by the app's langs/ dictionaries, which agentbox does not
// load, so it stays as written. A value that is not a string is returned
// as it is.
func (c *call) lang(fc goja.FunctionCall) goja.Value {
	if len(fc.Arguments) == 0 {
		return goja.Undefined()
	}
	s, ok := asString(fc.Argument(0))
	if !ok {
		return fc.Argument(0)
	}
	return c.vm.ToValue(strings.TrimPrefix(s, "::"))
}

// authorized is Yao's Authorized(): the request's authorized user
// ({user_id}), null when there is none.
func (c *call) authorized(goja.FunctionCall) goja.Value {
	if c.hc.UserID == "" {
		return goja.Null()
	}
	return c.toJS(map[string]any{"user_id": c.hc.UserID})
}

// funcHead is Yao's pattern for a named function's head in Eval's source
// (gou functions/eval): Eval turns it into an arrow function.
var funcHead = regexp.MustCompile(`\s*function\s+(\w+)\s*\(([^)]*)\)\s*\{`)

// eval is Yao's Eval(source, ...args): source is a function ("function
// name(a, b) { ... }" or an arrow function), called with args.
func (c *call) eval(fc goja.FunctionCall) goja.Value {
	src, ok := asString(fc.Argument(0))
	if !ok {
		c.throw(argErr("Eval: the first argument is the function's source (a string), got %s", typeName(fc.Argument(0))), "")
	}
	src = funcHead.ReplaceAllString(src, "($2) => {")
	v, err := c.vm.RunScript("eval", src)
	if err != nil {
		c.rethrow(err) // a syntax error or a throw, as the hook's own
	}
	fn, ok := goja.AssertFunction(v)
	if !ok {
		c.throw(argErr("Eval: the source is not a function (got %s)", typeName(v)), "")
	}
	var args []goja.Value
	if len(fc.Arguments) > 1 {
		args = fc.Arguments[1:]
	}
	out, err := fn(goja.Undefined(), args...)
	if err != nil {
		c.rethrow(err)
	}
	return out
}

// rethrow throws what a call into JS from a native function failed with:
// the script's exception as it is, an interrupt on up.
func (c *call) rethrow(err error) {
	var ex *goja.Exception
	if errors.As(err, &ex) {
		panic(ex)
	}
	var ie *goja.InterruptedError
	if errors.As(err, &ie) {
		panic(ie)
	}
	c.throw(err, CodeHookError)
}

// use is Yao's Use(Constructor, ...args, callback): callback gets a new
// instance, whose __release method, if any, is called after it.
func (c *call) use(fc goja.FunctionCall) goja.Value {
	args := fc.Arguments
	if len(args) < 2 {
		c.throw(argErr("Use() requires at least 2 arguments: Constructor and callback"), "")
	}
	ctor, ok := args[0].(*goja.Object)
	if !ok || !isFunction(ctor) {
		c.throw(argErr("Use() requires a constructor function as the first argument"), "")
	}
	cb, ok := goja.AssertFunction(args[len(args)-1])
	if !ok {
		c.throw(argErr("Use() requires a callback function as the last argument"), "")
	}
	inst, err := c.vm.New(ctor, args[1:len(args)-1]...)
	if err != nil {
		c.rethrow(err)
	}
	out, err := cb(goja.Undefined(), inst)
	if release, ok := goja.AssertFunction(inst.Get("__release")); ok {
		_, _ = release(inst)
	}
	if err != nil {
		c.rethrow(err)
	}
	return out
}

// task is one process All, Any or Race runs.
type task struct {
	name    string
	args    []any
	timeout time.Duration
}

// concurrent is Yao's All, Any and Race(tasks): each task {process, args,
// timeout (seconds)} runs in a runtime of its own, at most
// maxConcurrentTasks at once, within the call's deadline. The result is
// one {data, index, error?} per task, in order. All waits for every task;
// Any returns once a task succeeds with a value, Race once any ends,
// stopping the others (their entries stay {data: null}).
func (c *call) concurrent(fn string, fc goja.FunctionCall) goja.Value {
	raw, err := c.exportJSON(fc.Argument(0))
	list, isList := raw.([]any)
	if err != nil || !isList {
		c.throw(argErr("%s: the first parameter should be an array of tasks ({process, args, timeout})", fn), "")
	}
	tasks := make([]task, len(list))
	for i, item := range list {
		m, ok := item.(map[string]any)
		name, _ := m["process"].(string)
		if !ok || name == "" {
			c.throw(argErr("%s: task[%d]: 'process' field is required and must be a string", fn, i), "")
		}
		tasks[i].name = name
		tasks[i].args, _ = m["args"].([]any)
		if t, ok := m["timeout"].(float64); ok && t > 0 {
			tasks[i].timeout = time.Duration(t * float64(time.Second))
		}
	}
	results := make([]map[string]any, len(tasks))
	for i := range results {
		results[i] = map[string]any{"data": nil, "index": i}
	}
	ctx, cancel := context.WithCancel(c.ctx)
	defer cancel()
	s := c.h.scripts
	if s == nil {
		s = noScripts
	}
	var (
		wg   sync.WaitGroup
		mu   sync.Mutex
		done bool
		slot = make(chan struct{}, maxConcurrentTasks)
	)
	for i, t := range tasks {
		wg.Go(func() {
			select {
			case slot <- struct{}{}:
				defer func() { <-slot }()
			case <-ctx.Done():
				return
			}
			tctx := ctx
			if t.timeout > 0 {
				var tcancel context.CancelFunc
				tctx, tcancel = context.WithTimeout(ctx, t.timeout)
				defer tcancel()
			}
			v, err := s.run(tctx, c.hc, t.name, t.args, false)
			mu.Lock()
			defer mu.Unlock()
			if done {
				return
			}
			if err != nil {
				results[i]["error"] = err.Error()
			} else {
				results[i]["data"] = v
			}
			if (fn == "Any" && err == nil && v != nil) || fn == "Race" {
				done = true
				cancel()
			}
		})
	}
	wg.Wait()
	if c.ctx.Err() != nil {
		c.throw(c.ctx.Err(), CodeHookTimeout)
	}
	out := make([]any, len(results))
	for i, r := range results {
		out[i] = r
	}
	return c.toJS(out)
}
