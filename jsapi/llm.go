package jsapi

import (
	"context"
	"errors"
	"fmt"
	"strconv"

	"github.com/dop251/goja"

	"github.com/agentbox/agentbox/chat"
)

// LLM calls the app's connectors for hooks (ctx.llm). The pipeline
// implements it; a Context without one has no ctx.llm calls (they return
// an error).
type LLM interface {
	// CallLLM streams one completion of connector call.Connector, bounded
	// by ctx, through the connector's breaker, and counts its usage in the
	// request's. A call that cannot run (an unknown connector, bad
	// options, an open breaker) or fails is an LLMResult with Err set.
	CallLLM(ctx context.Context, call LLMCall) LLMResult
}

// LLMCall is one ctx.llm call.
type LLMCall struct {
	Connector string
	// Messages are sent as they are, system messages included.
	Messages []chat.Message
	// Options are Yao's call options as the hook gave them (temperature,
	// max_tokens, top_p, stop, tools, response_format, ...), checked by
	// the implementation.
	Options map[string]any
	// Emit receives the answer's events (text, thinking, tool calls) as
	// they stream, with the connector's own message ids (never a done
	// event); nil runs the call silently.
	Emit chat.EmitFunc
}

// LLMResult is how a ctx.llm call ended.
type LLMResult struct {
	Connector string
	// Model is the model that answered, as the provider names it.
	Model        string
	Content      string
	Thinking     string
	ToolCalls    []chat.ToolCall
	FinishReason string
	Usage        chat.Usage
	Err          error
}

var (
	llmMembers     = []string{"Stream", "All", "Any", "Race"}
	llmRequestKeys = []string{"connector", "messages", "options"}
)

// llmReq is one parsed ctx.llm call.
type llmReq struct {
	call    LLMCall
	onChunk goja.Callable
}

// llmObject builds ctx.llm (Yao's agent/context/jsapi_llm.go).
func (c *call) llmObject() *goja.Object {
	return c.newLazy(llmMembers, func(key string) goja.Value {
		fn := "llm." + key
		if key == "Stream" {
			return c.vm.ToValue(nativeFn(func(fc goja.FunctionCall) goja.Value {
				id, ok := asString(fc.Argument(0))
				if !ok || id == "" {
					c.throw(argErr("%s: want the connector id as the first argument, got %s", fn, typeName(fc.Argument(0))), "")
				}
				r := c.llmRequest(fn, id, fc.Argument(1), fc.Argument(2), true)
				res := c.runLLM(fn, []llmReq{r}, fanAll, nil)
				return res[0]
			}))
		}
		return c.vm.ToValue(nativeFn(func(fc goja.FunctionCall) goja.Value {
			elems := c.requestArray(fn, fc.Argument(0), "{connector, messages, options?}")
			reqs := make([]llmReq, len(elems))
			for i, eo := range elems {
				at := fmt.Sprintf("%s: requests[%d]", fn, i)
				c.knownKeys(at, eo, llmRequestKeys)
				id, ok := asString(eo.Get("connector"))
				if !ok || id == "" {
					c.throw(argErr("%s.connector: want a connector id, got %s", at, typeName(eo.Get("connector"))), "")
				}
				reqs[i] = c.llmRequest(at, id, eo.Get("messages"), eo.Get("options"), false)
			}
			onChunk := c.batchOnChunk(fn, fc.Argument(1), "(connector, index, message)")
			mode := map[string]string{"All": fanAll, "Any": fanAny, "Race": fanRace}[key]
			return c.vm.NewArray(anySlice(c.runLLM(fn, reqs, mode, onChunk))...)
		}))
	})
}

// llmRequest parses (messages, options?) of a call of connector id;
// Stream's options may hold onChunk (ownChunk), a batch request's not.
func (c *call) llmRequest(at, id string, msgsV, optsV goja.Value, ownChunk bool) llmReq {
	msgs, _, err := c.messagesFromJS(msgsV)
	if err != nil {
		c.throw(argErr("%s: %v", at, err), "")
	}
	if len(msgs) == 0 {
		c.throw(argErr("%s: messages is empty: give the model at least one message", at), "")
	}
	r := llmReq{call: LLMCall{Connector: id, Messages: msgs}}
	if isNullish(optsV) {
		return r
	}
	if !isPlainObject(optsV) {
		c.throw(argErr("%s: options: want an object, got %s", at, typeName(optsV)), "")
	}
	o := optsV.(*goja.Object)
	opts := map[string]any{}
	for _, k := range o.Keys() {
		v := o.Get(k)
		if isNullish(v) {
			continue
		}
		if k == "onChunk" {
			f, ok := goja.AssertFunction(v)
			if !ok || !ownChunk {
				c.throw(argErr("%s: options.onChunk: a batch takes one onChunk in its own options, (connector, index, message) => number", at), "")
			}
			r.onChunk = f
			continue
		}
		x, err := c.exportJSON(v)
		if err != nil {
			c.throw(argErr("%s: options.%s is not JSON: %v", at, k, err), "")
		}
		opts[k] = x
	}
	if len(opts) > 0 {
		r.call.Options = opts
	}
	return r
}

// runLLM runs reqs at once and returns their results in Yao's shape: all
// of them in request order for All; for Any the first success alone, or
// every failure when none succeeded; for Race the first to end alone.
// Every call's answer streams to the client as messages of the hook.
func (c *call) runLLM(fn string, reqs []llmReq, mode string, onChunk goja.Callable) []goja.Value {
	hc := c.hc
	prefixes := make([]string, len(reqs))
	for i := range reqs {
		hc.mu.Lock()
		hc.llmSeq++
		prefixes[i] = "llm-" + strconv.Itoa(hc.llmSeq) + "/"
		hc.mu.Unlock()
	}
	got := c.fan(fanOut{fn: fn, mode: mode, n: len(reqs),
		wants: func(i int) bool { return reqs[i].onChunk != nil || onChunk != nil },
		run: func(ctx context.Context, i int, chunk chat.EmitFunc) (any, bool) {
			call := reqs[i].call
			call.Emit = func(e chat.Event) {
				if e.Event == chat.Done {
					return
				}
				e.ID = prefixes[i] + e.ID
				hc.emit(e)
				if chunk != nil {
					chunk(e)
				}
			}
			api := hc.LLM
			if c.llm != nil {
				api = c.llm
			}
			if api == nil {
				return LLMResult{Connector: call.Connector, Err: errors.New("calling connectors is not available here")}, true
			}
			res := api.CallLLM(ctx, call)
			res.Connector = call.Connector
			return res, res.Err != nil
		},
		onChunk: func(i int, e chat.Event) (goja.Value, error) {
			if f := reqs[i].onChunk; f != nil {
				return f(goja.Undefined(), c.llmChunkJS(e))
			}
			return onChunk(goja.Undefined(), c.vm.ToValue(reqs[i].call.Connector), c.vm.ToValue(i), c.llmChunkJS(e))
		},
	})
	if mode == fanAll {
		out := make([]goja.Value, len(reqs))
		for _, d := range got {
			out[d.idx] = c.llmResultJS(d.res.(LLMResult))
		}
		return out
	}
	if mode == fanAny && len(got) > 0 && !got[len(got)-1].failed {
		got = got[len(got)-1:]
	}
	out := make([]goja.Value, len(got))
	for i, d := range got {
		out[i] = c.llmResultJS(d.res.(LLMResult))
	}
	return out
}

// llmResultJS is Yao's llm.Result: {connector, response, content, error},
// response its CompletionResponse.
func (c *call) llmResultJS(r LLMResult) goja.Value {
	o := map[string]any{"connector": r.Connector}
	if r.Err != nil {
		o["error"] = r.Err.Error()
		if ce := (*chat.Error)(nil); errors.As(r.Err, &ce) && ce.Code != "" {
			o["error"], o["code"] = ce.Message, ce.Code
		}
		return c.toJS(o)
	}
	resp := map[string]any{"object": "chat.completion", "model": r.Model, "role": chat.RoleAssistant, "content": r.Content,
		"finish_reason": r.FinishReason, "usage": map[string]any{"prompt_tokens": r.Usage.InputTokens,
			"completion_tokens": r.Usage.OutputTokens, "total_tokens": r.Usage.InputTokens + r.Usage.OutputTokens}}
	if r.Thinking != "" {
		resp["reasoning_content"] = r.Thinking
	}
	if len(r.ToolCalls) > 0 {
		calls := make([]map[string]any, len(r.ToolCalls))
		for i, tc := range r.ToolCalls {
			calls[i] = map[string]any{"id": tc.ID, "type": "function", "function": map[string]any{"name": tc.Name, "arguments": tc.Arguments()}}
		}
		resp["tool_calls"] = calls
	}
	o["content"], o["response"] = r.Content, resp
	return c.toJS(o)
}

// llmChunkJS is a streamed piece of an answer as Yao's onChunk gets it (its
// message.Message): {type, message_id, delta, props: {content}}.
func (c *call) llmChunkJS(e chat.Event) goja.Value {
	m := map[string]any{"type": e.Type, "message_id": e.ID, "delta": e.Event == chat.Delta, "event": e.Event}
	props := map[string]any{}
	for k, v := range e.Props {
		props[k] = v
	}
	if e.Text != "" {
		props["content"] = e.Text
	}
	m["props"] = props
	return c.toJS(m)
}

// LLMFunc is a function as an LLM (a stub in tests, a Go program's own
// model calls).
type LLMFunc func(ctx context.Context, call LLMCall) LLMResult

// CallLLM implements LLM.
func (f LLMFunc) CallLLM(ctx context.Context, call LLMCall) LLMResult { return f(ctx, call) }
