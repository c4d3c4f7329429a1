package jsapi

import (
	"context"
	"fmt"
	"log/slog"
	"reflect"
	"slices"
	"strconv"

	"github.com/dop251/goja"

	"github.com/agentbox/agentbox/chat"
	"github.com/agentbox/agentbox/executor"
	"github.com/agentbox/agentbox/internal/hint"
)

// CreateResult is what a Create hook returned.
type CreateResult struct {
	// Messages replace the conversation (nil: unchanged).
	Messages []chat.Message
	// Options are the changes the hook made to the options, decoded
	// strictly: agentbox's {options: {...}} and Yao's fields at the top
	// level (temperature, max_tokens, connector, prompt_preset,
	// mcp_servers, locale, metadata, ...), the former winning. Merge them
	// over the turn's (chat.Options.Merge). Nil: none.
	Options *chat.Options
	// Ignored names the Yao-only fields the hook returned (uses,
	// force_uses, search), which agentbox does not run.
	Ignored []string
	// Delegate, when set, hands the turn to another assistant before the
	// model runs: its answer is the turn's.
	Delegate *Delegate
	// Unknown says what else the hook returned that neither Yao nor
	// agentbox knows (a field, a message's field), each with a hint when
	// a known name is close: ignored, as Yao ignores it.
	Unknown []string
}

// NextPayload is what the Next hook is given about the finished turn.
type NextPayload struct {
	Messages []chat.Message
	// Completion is the answer. The hook sees it as Yao's completion
	// object that is also the answer's text (see agentbox.d.ts).
	Completion Completion
	Tools      []executor.ToolCall
	// Error is the turn's error message ("" when it succeeded).
	Error string
}

// Completion is a finished answer in the shape of Yao's completion
// (OpenAI's chat completion message with usage).
type Completion struct {
	ID      string
	Model   string
	Created int64
	// Content is the answer text; ReasoningContent the thinking.
	Content          string
	ReasoningContent string
	// FinishReason is OpenAI's: stop, length, tool_calls, content_filter.
	FinishReason string
	ToolCalls    []CompletionToolCall
	Usage        chat.Usage
}

// CompletionToolCall is a tool call the model asked for.
type CompletionToolCall struct {
	ID, Name string
	// Arguments is the call's input as JSON text.
	Arguments string
}

// NextResult is what a Next hook returned: {data} replaces the response;
// metadata is for the log.
type NextResult struct {
	// Data is the JSON-decoded value of data (nil when none was given).
	Data any
	// HasData reports whether the hook returned data.
	HasData bool
	// Metadata is the JSON-decoded value of metadata, if any.
	Metadata map[string]any
	// Delegate, when set, hands the turn to another assistant after this
	// one answered: its answer replaces this one's.
	Delegate *Delegate
}

// call is one hook invocation in a runtime of its own. Everything in it is
// touched only from the goroutine that runs the hook, except vm.Interrupt.
type call struct {
	h      *Hooks
	vm     *goja.Runtime
	parent context.Context
	// ctx is the hook's context: parent bounded by the hook timeout. Host
	// work the hook starts runs with it.
	ctx    context.Context
	cancel context.CancelFunc
	stop   func() bool
	hc     *Context
	hook   string
	// logger is made on the first log line.
	logger *slog.Logger

	jsonString goja.Callable
	// stringCtor is the pristine String constructor (completionJS).
	stringCtor goja.Value
	ns, top    *goja.Object
	// yaoOnly are the Yao-only globals the call used (RunTest reports them).
	yaoOnly []string
	// llm, when set, runs ctx.llm's calls in place of hc.LLM (a test's).
	llm LLM
}

// start creates the runtime, installs the globals, and runs the module.
// The caller must call finish on the returned call, also when err != nil.
func (h *Hooks) start(parent context.Context, hc *Context, hook string) (c *call, err error) {
	if hc == nil {
		hc = &Context{}
	}
	ctx, cancel := context.WithTimeout(parent, h.timeout)
	vm := goja.New()
	vm.SetMaxCallStackSize(maxCallStack)
	c = &call{h: h, vm: vm, parent: parent, ctx: ctx, cancel: cancel, hc: hc, hook: hook}
	// The only cross-goroutine touch of the runtime: Interrupt is made for
	// it. Code running past the deadline stops at its next instruction.
	c.stop = context.AfterFunc(ctx, func() { vm.Interrupt(ctx.Err()) })
	defer c.recoverTo(&err)

	// Host code uses the pristine JSON.stringify, not what a hook may have
	// patched.
	c.jsonString, _ = goja.AssertFunction(vm.Get("JSON").ToObject(vm).Get("stringify"))
	c.stringCtor = vm.Get("String")
	c.installLog()
	c.installYao()
	if _, err := vm.RunProgram(h.prog); err != nil {
		return c, c.hookError(err)
	}
	c.ns = objectOf(vm.Get(nsGlobal))
	c.top = objectOf(vm.Get(topGlobal))
	return c, nil
}

// finish releases the call's timer and interrupt watch. The runtime is
// dropped: nothing of it is ever reused.
func (c *call) finish() {
	c.stop()
	c.cancel()
}

// timedOut reports whether the hook's own timeout (not the request) ended
// the call.
func (c *call) timedOut() bool { return c.parent.Err() == nil }

// recoverTo turns a Go panic in host code into an error rather than a
// crashed server.
func (c *call) recoverTo(err *error) {
	if r := recover(); r != nil {
		*err = &Error{Hook: c.hook, Name: "Error", Code: CodeHookError, Message: fmt.Sprintf("internal error in the hook engine: %v", r)}
	}
}

func objectOf(v goja.Value) *goja.Object {
	if v == nil || goja.IsUndefined(v) || goja.IsNull(v) {
		return nil
	}
	o, _ := v.(*goja.Object)
	return o
}

// lookup finds fn among the exports, then the top-level functions.
func (c *call) lookup(fn string) goja.Callable {
	for _, o := range []*goja.Object{c.ns, c.top} {
		if o == nil {
			continue
		}
		if f, ok := goja.AssertFunction(o.Get(fn)); ok {
			return f
		}
	}
	return nil
}

// funcNames lists the functions the module defines, sorted.
func (c *call) funcNames() []string {
	var out []string
	for _, o := range []*goja.Object{c.ns, c.top} {
		if o == nil {
			continue
		}
		for _, k := range o.Keys() {
			if k == "default" || slices.Contains(out, k) {
				continue
			}
			if _, ok := goja.AssertFunction(o.Get(k)); ok {
				out = append(out, k)
			}
		}
	}
	slices.Sort(out)
	return out
}

var promiseType = reflect.TypeOf((*goja.Promise)(nil))

// invoke calls fn with args. ok is false when the module has no such
// function. A returned Promise is settled first (hooks run synchronously;
// an async function without real waiting settles at once).
func (c *call) invoke(fn string, args ...goja.Value) (v goja.Value, ok bool, err error) {
	f := c.lookup(fn)
	if f == nil {
		return nil, false, nil
	}
	defer c.recoverTo(&err)
	v, err = f(goja.Undefined(), args...)
	if err != nil {
		return nil, true, c.hookError(err)
	}
	if o, isObj := v.(*goja.Object); isObj && o.ExportType() == promiseType {
		if p, isPromise := o.Export().(*goja.Promise); isPromise {
			switch p.State() {
			case goja.PromiseStateFulfilled:
				v = p.Result()
			case goja.PromiseStateRejected:
				e := &Error{Hook: c.hook, Name: "Error", Code: CodeHookError}
				c.describe(e, p.Result())
				if o := objectOf(p.Result()); o != nil {
					e.Stack = stringProp(o, "stack")
				}
				return nil, true, e
			default:
				return nil, true, &Error{Hook: c.hook, Name: "Error", Code: CodeInvalidResult,
					Message: fmt.Sprintf("%s returned a Promise that did not settle: hooks run synchronously, so nothing can be awaited", fn)}
			}
		}
	}
	return v, true, nil
}

// Create runs the Create hook. A nil result (and nil error) means go on
// unchanged: the hooks define no Create, or it returned null/undefined. A
// thrown error, a timeout or a wrong shape is an *Error; messages the hook
// left streaming are ended then.
func (h *Hooks) Create(ctx context.Context, hc *Context, messages []chat.Message, options chat.Options) (*CreateResult, error) {
	if h == nil || !h.Has("Create") {
		return nil, nil
	}
	c, err := h.start(ctx, hc, "Create")
	defer c.finish()
	var res *CreateResult
	if err == nil {
		res, err = c.create(messages, options)
	}
	if err != nil {
		// The request is rejected: nothing will end what the hook streamed.
		c.hc.EndOpen()
		return nil, err
	}
	return res, nil
}

func (c *call) create(messages []chat.Message, options chat.Options) (*CreateResult, error) {
	v, ok, err := c.invoke("Create", c.ctxObject(), c.messagesJS(messages), c.optionsJS(options))
	if err != nil || !ok {
		return nil, err
	}
	return c.createResult(v)
}

// Next runs the Next hook. A nil result means keep the response; {data}
// gives a NextResult. Messages the hook (or Create) left streaming are
// ended when it returns.
func (h *Hooks) Next(ctx context.Context, hc *Context, p NextPayload, options chat.Options) (*NextResult, error) {
	if h == nil || !h.Has("Next") {
		if hc != nil {
			hc.EndOpen()
		}
		return nil, nil
	}
	c, err := h.start(ctx, hc, "Next")
	defer c.finish()
	defer c.hc.EndOpen()
	if err != nil {
		return nil, err
	}
	v, ok, err := c.invoke("Next", c.ctxObject(), c.nextPayloadJS(p), c.optionsJS(options))
	if err != nil || !ok {
		return nil, err
	}
	return c.nextResult(v)
}

// Call runs the hook function fn(ctx, args) and returns its JSON-decoded
// result (nil for null/undefined). It is how host tools defined in hook
// code are run. An unknown fn is an *Error with code NO_FUNCTION wrapping
// ErrNoFunction.
func (h *Hooks) Call(ctx context.Context, hc *Context, fn string, args any) (any, error) {
	if h == nil || !h.Has(fn) {
		return nil, &Error{Hook: fn, Name: "Error", Code: CodeNoFunction, Message: fmt.Sprintf("the hooks define no function %q", fn), Err: ErrNoFunction}
	}
	c, err := h.start(ctx, hc, fn)
	defer c.finish()
	if err != nil {
		return nil, err
	}
	v, ok, err := c.invoke(fn, c.ctxObject(), c.toJS(args))
	if err != nil {
		return nil, err
	}
	if !ok {
		return nil, &Error{Hook: fn, Name: "Error", Code: CodeNoFunction, Message: fmt.Sprintf("the hooks define no function %q", fn), Err: ErrNoFunction}
	}
	out, err := c.exportJSON(v)
	if err != nil {
		return nil, c.resultErr("%s returned a value that is not JSON: %v", fn, err)
	}
	return out, nil
}

func (c *call) resultErr(format string, args ...any) *Error {
	return &Error{Hook: c.hook, Name: "TypeError", Code: CodeInvalidResult, Message: fmt.Sprintf(format, args...)}
}

// yaoCreateOnly are fields of Yao's Create result that agentbox does not
// run: accepted, reported in CreateResult.Ignored.
var yaoCreateOnly = []string{"force_uses", "search", "uses"}

// createResult checks and converts Create's return value: agentbox's
// {messages, options} and Yao's fields at the top level.
func (c *call) createResult(v goja.Value) (*CreateResult, error) {
	if isNullish(v) {
		return nil, nil
	}
	o, ok := v.(*goja.Object)
	if !ok || o.ClassName() == "Array" || isFunction(v) {
		return nil, c.resultErr("Create must return null or {messages, options}, got %s", typeName(v))
	}
	res := &CreateResult{}
	top := c.vm.NewObject()
	topSet := false
	var opts *chat.Options
	for _, k := range o.Keys() {
		val := o.Get(k)
		switch {
		case k == "messages":
			if isNullish(val) {
				continue
			}
			msgs, unknown, err := c.messagesFromJS(val)
			if err != nil {
				return nil, c.resultErr("Create returned %v", err)
			}
			res.Messages = msgs
			res.Unknown = append(res.Unknown, unknown...)
		case k == "options":
			if isNullish(val) {
				continue
			}
			if !isPlainObject(val) {
				return nil, c.resultErr("Create returned options: want an object, got %s", typeName(val))
			}
			o, err := c.optionsFromJS(val, "options")
			if err != nil {
				return nil, c.resultErr("Create returned %v", err)
			}
			opts = &o
		case k == "delegate":
			if isNullish(val) {
				continue
			}
			d, err := c.delegateFromJS("Create", val)
			if err != nil {
				return nil, err
			}
			res.Delegate = d
		case slices.Contains(yaoCreateOnly, k):
			if !isNullish(val) {
				res.Ignored = append(res.Ignored, k)
			}
		case slices.Contains(chat.OptionNames(), k) && k != "sandbox":
			// Yao's fields at the top level (temperature, connector,
			// prompt_preset, ...), decoded as options below.
			_ = top.Set(k, val)
			topSet = true
		default:
			// Yao decodes the result into its HookCreateResponse, which
			// drops what it does not know.
			known := append(chat.OptionNames(), "messages", "options", "delegate")
			known = append(known, yaoCreateOnly...)
			known = slices.DeleteFunc(known, func(s string) bool { return s == "sandbox" })
			u := strconv.Quote(k)
			if best := hint.Closest(k, known); best != "" {
				u += fmt.Sprintf(" (did you mean %q?)", best)
			}
			res.Unknown = append(res.Unknown, u)
		}
	}
	if topSet {
		t, err := c.optionsFromJS(top, "")
		if err != nil {
			return nil, c.resultErr("Create returned %v", err)
		}
		if opts != nil {
			t = t.Merge(*opts)
		}
		opts = &t
	}
	res.Options = opts
	return res, nil
}

// nextResult checks and converts Next's return value: {data} and Yao's
// {metadata}; Yao's {delegate} is refused.
func (c *call) nextResult(v goja.Value) (*NextResult, error) {
	if isNullish(v) {
		return nil, nil
	}
	o, ok := v.(*goja.Object)
	if !ok || o.ClassName() == "Array" || isFunction(v) {
		return nil, c.resultErr("Next must return null or {data}, got %s", typeName(v))
	}
	res := &NextResult{}
	keys := o.Keys()
	if !slices.Contains(keys, "data") && !slices.Contains(keys, "metadata") && !slices.Contains(keys, "delegate") {
		return nil, c.resultErr("Next must return null, {data} or {metadata}, got an object with neither")
	}
	for _, k := range keys {
		val := o.Get(k)
		switch k {
		case "data":
			data, err := c.exportJSON(val)
			if err != nil {
				return nil, c.resultErr("Next returned data that is not JSON: %v", err)
			}
			res.Data, res.HasData = data, true
		case "metadata":
			if isNullish(val) {
				continue
			}
			m, err := c.exportJSON(val)
			obj, isObj := m.(map[string]any)
			if err != nil || !isObj {
				return nil, c.resultErr("Next returned metadata: want an object of JSON values")
			}
			res.Metadata = obj
		case "delegate":
			if isNullish(val) {
				continue
			}
			d, err := c.delegateFromJS("Next", val)
			if err != nil {
				return nil, err
			}
			res.Delegate = d
		default:
			return nil, c.resultErr("Next returned an unknown field %q: it must return null, {data} or {metadata}", k)
		}
	}
	return res, nil
}
