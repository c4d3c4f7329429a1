package jsapi

import (
	"context"
	"errors"
	"fmt"
	"reflect"
	"regexp"
	"strings"
	"sync"

	"github.com/dop251/goja"

	"github.com/agentbox/agentbox/chat"
	"github.com/agentbox/agentbox/internal/jsonpath"
)

// This file runs script tests: Yao's *_test.ts functions Test...(t, ctx),
// and the functions test cases name around them (before and after
// functions, script assertions), in the same engine and runtime-per-call as
// hooks.

// TestingT records what a script test did with Yao's t object: its
// assertions (t.assert.*), logs, failure and skip. A TestingT belongs to
// one test; it is safe for concurrent reads while the test runs.
type TestingT struct {
	// Name is the test function's name (t.name).
	Name string
	// Log receives every line the test logs (t.log); nil keeps them in
	// Logs only.
	Log func(line string)
	// Judge runs t.assert.Agent(response, agentID, {criteria, metadata,
	// connector}): it asks the judge assistant and says whether the
	// response passed and why. Nil makes t.assert.Agent fail.
	Judge func(ctx context.Context, response any, agentID string, options map[string]any) (passed bool, reason string)

	mu      sync.Mutex
	failed  bool
	skipped bool
	reason  string
	logs    []string
	errs    []string
	first   *TestAssertion
}

// TestAssertion is the first t.assert that failed.
type TestAssertion struct {
	Type     string
	Expected any
	Actual   any
	Message  string
}

// Failed reports whether the test failed (an assertion, t.error, t.fail).
func (t *TestingT) Failed() bool {
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.failed
}

// Skipped reports whether the test called t.skip, and why.
func (t *TestingT) Skipped() (bool, string) {
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.skipped, t.reason
}

// Errors are the failure messages, in order.
func (t *TestingT) Errors() []string {
	t.mu.Lock()
	defer t.mu.Unlock()
	return append([]string(nil), t.errs...)
}

// Logs are the lines the test logged with t.log.
func (t *TestingT) Logs() []string {
	t.mu.Lock()
	defer t.mu.Unlock()
	return append([]string(nil), t.logs...)
}

// FirstAssertion is the first failed assertion, nil when none failed.
func (t *TestingT) FirstAssertion() *TestAssertion {
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.first
}

func (t *TestingT) log(line string) {
	t.mu.Lock()
	t.logs = append(t.logs, line)
	t.mu.Unlock()
	if t.Log != nil {
		t.Log(line)
	}
}

func (t *TestingT) fail(msg string, a *TestAssertion) {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.failed = true
	t.errs = append(t.errs, msg)
	if t.first == nil && a != nil {
		t.first = a
	}
}

func (t *TestingT) skip(reason string) {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.skipped, t.reason = true, reason
}

// TestCtx is what a test's ctx has beyond a hook's: Yao's ctx.agent.Call,
// the connectors of ctx.llm, and plain fields (Yao's authorized, team_id, ...).
type TestCtx struct {
	// Agent runs ctx.agent.Call(assistantID, messages, options?): another
	// assistant's whole turn. It returns Yao's {agent_id, content,
	// response, error}.
	Agent func(ctx context.Context, assistantID string, messages []chat.Message, options map[string]any) map[string]any
	// LLM runs ctx.llm's calls (Stream, All, Any, Race) in place of the
	// Context's: a test's connectors, or a stub.
	LLM LLM
	// Fields are set on ctx as they are.
	Fields map[string]any
}

// CtxArg stands for the ctx object among Apply's arguments.
var CtxArg = &struct{ ctx bool }{true}

// RunTest calls the test function fn(t, ctx). It returns the Yao-only
// globals the test touched (each threw YAO_ONLY where it was used, even if
// the test caught it) and the error the test threw, nil when it returned
// or ended with t.fatal, t.failNow or t.skip. t holds the rest.
func (h *Hooks) RunTest(ctx context.Context, hc *Context, fn string, t *TestingT, x *TestCtx) (yaoOnly []string, err error) {
	if h == nil || !h.Has(fn) {
		return nil, &Error{Hook: fn, Name: "Error", Code: CodeNoFunction, Message: fmt.Sprintf("the file defines no function %q", fn), Err: ErrNoFunction}
	}
	c, err := h.start(ctx, hc, fn)
	defer c.finish()
	if err != nil {
		return c.yaoOnly, err
	}
	tt := &testT{c: c, t: t, stop: c.vm.NewObject()}
	_ = tt.stop.Set("message", "test stopped")
	_, _, err = c.invoke(fn, tt.object(), c.testCtxObject(x))
	var je *Error
	if errors.As(err, &je) && tt.stopped(je) {
		err = nil
	}
	return c.yaoOnly, err
}

// Apply calls fn with args (CtxArg is the ctx object) and returns its
// JSON-decoded result and the Yao-only globals it touched. A missing fn is
// an *Error with code NO_FUNCTION.
func (h *Hooks) Apply(ctx context.Context, hc *Context, x *TestCtx, fn string, args ...any) (any, []string, error) {
	if h == nil || !h.Has(fn) {
		return nil, nil, &Error{Hook: fn, Name: "Error", Code: CodeNoFunction, Message: fmt.Sprintf("the file defines no function %q", fn), Err: ErrNoFunction}
	}
	c, err := h.start(ctx, hc, fn)
	defer c.finish()
	if err != nil {
		return nil, c.yaoOnly, err
	}
	vals := make([]goja.Value, len(args))
	for i, a := range args {
		if a == CtxArg {
			vals[i] = c.testCtxObject(x)
		} else {
			vals[i] = c.toJS(a)
		}
	}
	v, _, err := c.invoke(fn, vals...)
	if err != nil {
		return nil, c.yaoOnly, err
	}
	out, err := c.exportJSON(v)
	if err != nil {
		return nil, c.yaoOnly, c.resultErr("%s returned a value that is not JSON: %v", fn, err)
	}
	return out, c.yaoOnly, nil
}

// testCtxObject is a hook's ctx with the test's additions.
func (c *call) testCtxObject(x *TestCtx) *goja.Object {
	o := c.ctxObject()
	if x == nil {
		return o
	}
	for k, v := range x.Fields {
		_ = o.Set(k, c.toJS(v))
	}
	if x.Agent != nil {
		agent := c.vm.NewObject()
		_ = agent.Set("Call", func(fc goja.FunctionCall) goja.Value {
			id, _ := asString(fc.Argument(0))
			if id == "" {
				c.throw(argErr("ctx.agent.Call: the first argument is the assistant id"), "")
			}
			msgs := c.callMessages("ctx.agent.Call", fc.Argument(1))
			return c.toJS(x.Agent(c.ctx, id, msgs, c.optionsArg("ctx.agent.Call", fc.Argument(2))))
		})
		_ = o.Set("agent", agent)
	}
	if x.LLM != nil {
		c.llm = x.LLM
	}
	return o
}

// callMessages reads the messages argument of a test's ctx.agent.Call: a
// text or a list of messages.
func (c *call) callMessages(fn string, v goja.Value) []chat.Message {
	if s, ok := asString(v); ok {
		return []chat.Message{{Role: chat.RoleUser, Content: s}}
	}
	msgs, _, err := c.messagesFromJS(v)
	if err != nil {
		c.throw(argErr("%s: messages: %v", fn, err), "")
	}
	return msgs
}

func (c *call) optionsArg(fn string, v goja.Value) map[string]any {
	if isNullish(v) {
		return nil
	}
	o, err := c.exportJSON(v)
	m, ok := o.(map[string]any)
	if err != nil || !ok {
		c.throw(argErr("%s: options: want an object", fn), "")
	}
	return m
}

// testT builds Yao's t object for one test.
type testT struct {
	c *call
	t *TestingT
	// stop is thrown by t.fatal, t.failNow and t.skip to end the test.
	stop *goja.Object
}

func (tt *testT) stopped(e *Error) bool {
	var ex *goja.Exception
	return errors.As(e.Err, &ex) && ex.Value() == goja.Value(tt.stop)
}

func (tt *testT) object() *goja.Object {
	vm, t := tt.c.vm, tt.t
	o := vm.NewObject()
	_ = o.Set("name", t.Name)
	_ = o.DefineAccessorProperty("failed", vm.ToValue(func() bool { return t.Failed() }), nil, goja.FLAG_FALSE, goja.FLAG_TRUE)
	join := func(args []goja.Value) string {
		parts := make([]string, len(args))
		for i, a := range args {
			parts[i] = tt.c.logString(a)
		}
		return strings.Join(parts, " ")
	}
	logFn := func(fc goja.FunctionCall) goja.Value { t.log(join(fc.Arguments)); return goja.Undefined() }
	errorFn := func(fc goja.FunctionCall) goja.Value { t.fail(join(fc.Arguments), nil); return goja.Undefined() }
	failFn := func(fc goja.FunctionCall) goja.Value {
		msg := join(fc.Arguments)
		if msg == "" {
			msg = "test failed"
		}
		t.fail(msg, nil)
		return goja.Undefined()
	}
	fatalFn := func(fc goja.FunctionCall) goja.Value {
		msg := join(fc.Arguments)
		if msg == "" {
			msg = "fatal error"
		}
		t.fail(msg, nil)
		panic(tt.stop)
	}
	skipFn := func(fc goja.FunctionCall) goja.Value {
		t.skip(join(fc.Arguments))
		panic(tt.stop)
	}
	// Yao's runtime names them in lower case; its guide in Go's style.
	for _, m := range []struct {
		names []string
		fn    func(goja.FunctionCall) goja.Value
	}{
		{[]string{"log", "Log", "logf", "Logf"}, logFn},
		{[]string{"error", "Error", "errorf", "Errorf"}, errorFn},
		{[]string{"fail", "Fail"}, failFn},
		{[]string{"fatal", "Fatal", "fatalf", "Fatalf", "failNow", "FailNow"}, fatalFn},
		{[]string{"skip", "Skip", "skipf", "Skipf"}, skipFn},
	} {
		for _, n := range m.names {
			_ = o.Set(n, m.fn)
		}
	}
	_ = o.Set("assert", tt.assertObject())
	return o
}

// assertObject is t.assert: Yao's assertion methods. A failed assertion
// marks the test failed and lets it go on (as Go's t.Error does).
func (tt *testT) assertObject() *goja.Object {
	c, t := tt.c, tt.t
	a := c.vm.NewObject()
	msgArg := func(fc goja.FunctionCall, i int) string {
		if s, ok := asString(fc.Argument(i)); ok {
			return s
		}
		return ""
	}
	fail := func(typ, def, custom string, expected, actual any) {
		msg := def
		if custom != "" {
			msg = custom
		}
		t.fail(msg, &TestAssertion{Type: typ, Expected: expected, Actual: actual, Message: custom})
	}
	need := func(fc goja.FunctionCall, n int, typ, what string) bool {
		if len(fc.Arguments) < n {
			t.fail(typ+" requires "+what, &TestAssertion{Type: typ})
			return false
		}
		return true
	}
	val := func(v goja.Value) any {
		if isNullish(v) {
			return nil
		}
		if out, err := c.exportJSON(v); err == nil {
			return out
		}
		return v.String()
	}
	def := func(name string, n int, what string, check func(fc goja.FunctionCall)) {
		_ = a.Set(name, func(fc goja.FunctionCall) goja.Value {
			if need(fc, n, name, what) {
				check(fc)
			}
			return goja.Undefined()
		})
	}
	def("True", 1, "a value argument", func(fc goja.FunctionCall) {
		if !fc.Argument(0).ToBoolean() {
			fail("True", "expected true, got false", msgArg(fc, 1), true, false)
		}
	})
	def("False", 1, "a value argument", func(fc goja.FunctionCall) {
		if fc.Argument(0).ToBoolean() {
			fail("False", "expected false, got true", msgArg(fc, 1), false, true)
		}
	})
	def("Equal", 2, "actual and expected arguments", func(fc goja.FunctionCall) {
		got, want := val(fc.Argument(0)), val(fc.Argument(1))
		if !jsonEqual(got, want) {
			fail("Equal", fmt.Sprintf("expected %s, got %s", show(want), show(got)), msgArg(fc, 2), want, got)
		}
	})
	def("NotEqual", 2, "actual and expected arguments", func(fc goja.FunctionCall) {
		got, want := val(fc.Argument(0)), val(fc.Argument(1))
		if jsonEqual(got, want) {
			fail("NotEqual", fmt.Sprintf("expected values to differ, both are %s", show(got)), msgArg(fc, 2), want, got)
		}
	})
	def("Nil", 1, "a value argument", func(fc goja.FunctionCall) {
		if v := fc.Argument(0); !isNullish(v) {
			fail("Nil", "expected nil, got "+c.logString(v), msgArg(fc, 1), nil, val(v))
		}
	})
	def("NotNil", 1, "a value argument", func(fc goja.FunctionCall) {
		if isNullish(fc.Argument(0)) {
			fail("NotNil", "expected a value, got nil", msgArg(fc, 1), nil, nil)
		}
	})
	def("Contains", 2, "str and substr arguments", func(fc goja.FunctionCall) {
		s, sub := fc.Argument(0).String(), fc.Argument(1).String()
		if !strings.Contains(s, sub) {
			fail("Contains", fmt.Sprintf("expected %q to contain %q", s, sub), msgArg(fc, 2), sub, s)
		}
	})
	def("NotContains", 2, "str and substr arguments", func(fc goja.FunctionCall) {
		s, sub := fc.Argument(0).String(), fc.Argument(1).String()
		if strings.Contains(s, sub) {
			fail("NotContains", fmt.Sprintf("expected %q not to contain %q", s, sub), msgArg(fc, 2), sub, s)
		}
	})
	def("Len", 2, "value and length arguments", func(fc goja.FunctionCall) {
		n, want := length(val(fc.Argument(0))), int(fc.Argument(1).ToInteger())
		if n != want {
			fail("Len", fmt.Sprintf("expected length %d, got %d", want, n), msgArg(fc, 2), want, n)
		}
	})
	for _, cmp := range []struct {
		name, op string
		ok       func(x, y float64) bool
	}{
		{"Greater", ">", func(x, y float64) bool { return x > y }},
		{"GreaterOrEqual", ">=", func(x, y float64) bool { return x >= y }},
		{"Less", "<", func(x, y float64) bool { return x < y }},
		{"LessOrEqual", "<=", func(x, y float64) bool { return x <= y }},
	} {
		def(cmp.name, 2, "two arguments", func(fc goja.FunctionCall) {
			x, y := fc.Argument(0).ToFloat(), fc.Argument(1).ToFloat()
			if !cmp.ok(x, y) {
				fail(cmp.name, fmt.Sprintf("expected %v %s %v", x, cmp.op, y), msgArg(fc, 2), fmt.Sprintf("%s %v", cmp.op, y), x)
			}
		})
	}
	def("Error", 1, "an argument", func(fc goja.FunctionCall) {
		if isNullish(fc.Argument(0)) {
			fail("Error", "expected an error, got nil", msgArg(fc, 1), nil, nil)
		}
	})
	def("NoError", 1, "an argument", func(fc goja.FunctionCall) {
		if v := fc.Argument(0); !isNullish(v) {
			fail("NoError", "expected no error, got "+c.logString(v), msgArg(fc, 1), nil, c.logString(v))
		}
	})
	panics := func(fc goja.FunctionCall, name string) (threw, ok bool, err error) {
		f, isFn := goja.AssertFunction(fc.Argument(0))
		if !isFn {
			t.fail(name+" requires a function argument", &TestAssertion{Type: name})
			return false, false, nil
		}
		_, err = f(goja.Undefined())
		if err != nil {
			// An interrupt (the deadline) and the test's own stop are not
			// the function's panic: they end the test.
			var ie *goja.InterruptedError
			var ex *goja.Exception
			if errors.As(err, &ie) || errors.As(err, &ex) && ex.Value() == goja.Value(tt.stop) {
				panic(err)
			}
		}
		return err != nil, true, err
	}
	def("Panic", 1, "a function argument", func(fc goja.FunctionCall) {
		if threw, ok, _ := panics(fc, "Panic"); ok && !threw {
			fail("Panic", "expected the function to throw, but it did not", msgArg(fc, 1), nil, nil)
		}
	})
	def("NoPanic", 1, "a function argument", func(fc goja.FunctionCall) {
		if threw, ok, err := panics(fc, "NoPanic"); ok && threw {
			fail("NoPanic", "expected the function not to throw, but it threw: "+err.Error(), msgArg(fc, 1), nil, err.Error())
		}
	})
	match := func(name string, want bool) {
		def(name, 2, "value and pattern arguments", func(fc goja.FunctionCall) {
			s, p := fc.Argument(0).String(), fc.Argument(1).String()
			re, err := regexp.Compile(p)
			if err != nil {
				fail(name, "invalid regex pattern: "+err.Error(), "", p, s)
				return
			}
			if re.MatchString(s) != want {
				verb := "to match"
				if !want {
					verb = "not to match"
				}
				fail(name, fmt.Sprintf("expected %q %s pattern %q", s, verb, p), msgArg(fc, 2), p, s)
			}
		})
	}
	match("Match", true)
	match("NotMatch", false)
	def("Type", 2, "value and typeName arguments", func(fc goja.FunctionCall) {
		got, want := jsType(fc.Argument(0)), fc.Argument(1).String()
		if got != want {
			fail("Type", fmt.Sprintf("expected type %q, got %q", want, got), msgArg(fc, 2), want, got)
		}
	})
	def("JSONPath", 3, "obj, path and expected arguments", func(fc goja.FunctionCall) {
		path := fc.Argument(1).String()
		got, want := jsonpath.Get(val(fc.Argument(0)), path), val(fc.Argument(2))
		if !jsonEqual(got, want) {
			fail("JSONPath", fmt.Sprintf("path %s: expected %s, got %s", path, show(want), show(got)), msgArg(fc, 3), want, got)
		}
	})
	def("Agent", 2, "response and agentID arguments", func(fc goja.FunctionCall) {
		resp, id := val(fc.Argument(0)), fc.Argument(1).String()
		opts, _ := val(fc.Argument(2)).(map[string]any)
		if t.Judge == nil {
			fail("Agent", "t.assert.Agent has no judge here", "", nil, resp)
			return
		}
		passed, reason := t.Judge(c.ctx, resp, id, opts)
		if !passed {
			if reason == "" {
				reason = "agent assertion failed"
			}
			fail("Agent", reason, "", nil, resp)
		}
	})
	return a
}

// jsonEqual compares two JSON-decoded values.
func jsonEqual(a, b any) bool { return reflect.DeepEqual(a, b) }

// show prints a JSON-decoded value for a message.
func show(v any) string {
	switch x := v.(type) {
	case nil:
		return "nil"
	case string:
		return fmt.Sprintf("%q", x)
	}
	return fmt.Sprint(v)
}

// length is Yao's Len: bytes of a string, items of a list, keys of an
// object.
func length(v any) int {
	switch x := v.(type) {
	case string:
		return len(x)
	case []any:
		return len(x)
	case map[string]any:
		return len(x)
	}
	return 0
}

// jsType names a value's type as Yao's t.assert.Type does.
func jsType(v goja.Value) string {
	switch {
	case v == nil || goja.IsUndefined(v):
		return "undefined"
	case goja.IsNull(v):
		return "null"
	case isFunction(v):
		return "function"
	}
	if o, ok := v.(*goja.Object); ok {
		if o.ClassName() == "Array" {
			return "array"
		}
		return "object"
	}
	switch v.ExportType().Kind() {
	case reflect.String:
		return "string"
	case reflect.Bool:
		return "boolean"
	case reflect.Int, reflect.Int64, reflect.Float64, reflect.Int32, reflect.Uint32:
		return "number"
	}
	return "unknown"
}
