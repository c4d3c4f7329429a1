package jsapi

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"

	"github.com/dop251/goja"

	"github.com/agentbox/agentbox/chat"
)

// Agents runs other assistants of the app for hooks: ctx.agent's calls
// and the delegate a Create or Next hook returns. The pipeline implements
// it; a Context without one has no ctx.agent calls (they return an error).
type Agents interface {
	// CallAgent runs the whole turn of the assistant call.AssistantID (its
	// hooks, its sandbox if it has one) as the request's user, bounded by
	// ctx. A call that cannot run (an unknown assistant, a cycle, too
	// deep) or fails is an AgentResult with Err set.
	CallAgent(ctx context.Context, call AgentCall) AgentResult
}

// AgentCall is one call of another assistant.
type AgentCall struct {
	AssistantID string
	Messages    []chat.Message
	// Connector and Metadata are Yao's call options.
	Connector string
	Metadata  map[string]any
	// Emit, when set, receives the callee's events as they stream (never
	// its done event); nil runs it silently.
	Emit chat.EmitFunc
}

// AgentResult is how a called assistant's turn ended.
type AgentResult struct {
	AssistantID string
	// ChatID is the chat the callee's turn ran in.
	ChatID       string
	Content      string
	FinishReason string
	Usage        chat.Usage
	// Data is what the callee's Next hook returned as {data}, when
	// HasData.
	Data    any
	HasData bool
	Err     error
}

// Delegate is a Create or Next hook's {delegate: {agent_id, messages,
// options}}: the turn is handed to another assistant, whose answer
// becomes the turn's.
type Delegate struct {
	AssistantID string
	// Messages are what the other assistant gets (nil: the turn's).
	Messages  []chat.Message
	Connector string
	Metadata  map[string]any
}

// MaxFanOut bounds the requests of one All, Any or Race (ctx.agent,
// ctx.llm).
const MaxFanOut = 16

var (
	agentMembers      = []string{"Call", "All", "Any", "Race"}
	agentOptionKeys   = []string{"connector", "metadata", "mode", "skip", "stream", "onChunk"}
	agentRequestKeys  = []string{"agent", "messages", "options"}
	agentDelegateKeys = []string{"agent_id", "messages", "options"}
)

// agentReq is one parsed call with what the hook asked of its output.
type agentReq struct {
	call    AgentCall
	stream  bool
	onChunk goja.Callable
}

// agentObject builds ctx.agent.
func (c *call) agentObject() *goja.Object {
	return c.newLazy(agentMembers, func(key string) goja.Value {
		fn := "agent." + key
		if key == "Call" {
			return c.vm.ToValue(nativeFn(func(fc goja.FunctionCall) goja.Value {
				id, ok := asString(fc.Argument(0))
				if !ok || id == "" {
					c.throw(argErr("%s: want the assistant id as the first argument, got %s", fn, typeName(fc.Argument(0))), "")
				}
				r := c.agentRequest(fn, id, fc.Argument(1), fc.Argument(2))
				res := c.runAgents(fn, []agentReq{r}, "all", nil)
				return res[0]
			}))
		}
		return c.vm.ToValue(nativeFn(func(fc goja.FunctionCall) goja.Value {
			elems := c.requestArray(fn, fc.Argument(0), "{agent, messages, options?}")
			reqs := make([]agentReq, len(elems))
			for i, eo := range elems {
				at := fmt.Sprintf("%s: requests[%d]", fn, i)
				c.knownKeys(at, eo, agentRequestKeys)
				id, ok := asString(eo.Get("agent"))
				if !ok || id == "" {
					c.throw(argErr("%s.agent: want an assistant id, got %s", at, typeName(eo.Get("agent"))), "")
				}
				reqs[i] = c.agentRequest(at, id, eo.Get("messages"), eo.Get("options"))
			}
			onChunk := c.batchOnChunk(fn, fc.Argument(1), "(agent_id, index, message)")
			mode := map[string]string{"All": fanAll, "Any": fanAny, "Race": fanRace}[key]
			return c.vm.NewArray(anySlice(c.runAgents(fn, reqs, mode, onChunk))...)
		}))
	})
}

// agentRequest parses (messages, options?) of a call of assistant id.
func (c *call) agentRequest(at, id string, msgsV, optsV goja.Value) agentReq {
	msgs, _, err := c.messagesFromJS(msgsV)
	if err != nil {
		c.throw(argErr("%s: %v", at, err), "")
	}
	if len(msgs) == 0 {
		c.throw(argErr("%s: messages is empty: give the assistant at least one message", at), "")
	}
	r := agentReq{call: AgentCall{AssistantID: id, Messages: msgs}}
	if isNullish(optsV) {
		return r
	}
	if !isPlainObject(optsV) {
		c.throw(argErr("%s: options: want an object, got %s", at, typeName(optsV)), "")
	}
	o := optsV.(*goja.Object)
	for _, k := range o.Keys() {
		v := o.Get(k)
		if isNullish(v) {
			continue
		}
		switch k {
		case "connector":
			s, ok := asString(v)
			if !ok {
				c.throw(argErr("%s: options.connector: want a connector id, got %s", at, typeName(v)), "")
			}
			r.call.Connector = s
		case "metadata":
			m, err := c.exportJSON(v)
			obj, isObj := m.(map[string]any)
			if err != nil || !isObj {
				c.throw(argErr("%s: options.metadata: want an object of JSON values", at), "")
			}
			r.call.Metadata = obj
		case "mode":
			// Yao's agent mode: agentbox assistants have one.
		case "skip":
			// Yao's skip: history is always skipped for a call (the
			// callee's turn is not stored) and output unless stream
			// asks for it, so there is nothing to switch.
			if !isPlainObject(v) {
				c.throw(argErr("%s: options.skip: want an object, got %s", at, typeName(v)), "")
			}
		case "stream":
			b, ok := asBool(v)
			if !ok {
				c.throw(argErr("%s: options.stream: want a boolean, got %s", at, typeName(v)), "")
			}
			r.stream = b
		case "onChunk":
			f, ok := goja.AssertFunction(v)
			if !ok {
				c.throw(argErr("%s: options.onChunk: want a function (message) => number, got %s", at, typeName(v)), "")
			}
			r.onChunk = f
		default:
			c.throw(argErr("%s: unknown option %q (want %s)", at, k, strings.Join(agentOptionKeys, ", ")), "")
		}
	}
	return r
}

// runAgents runs reqs at once and returns their results in Yao's shape,
// in request order: null for the calls Any or Race stopped (see fan).
// A call with stream set streams its events into the turn's, attributed.
func (c *call) runAgents(fn string, reqs []agentReq, mode string, onChunk goja.Callable) []goja.Value {
	hc := c.hc
	refs := make([]chat.AgentRef, len(reqs))
	for i, r := range reqs {
		hc.mu.Lock()
		hc.agentSeq++
		refs[i] = chat.AgentRef{ID: r.call.AssistantID, Call: "agent-" + strconv.Itoa(hc.agentSeq)}
		hc.mu.Unlock()
	}
	got := c.fan(fanOut{fn: fn, mode: mode, n: len(reqs),
		wants: func(i int) bool { return reqs[i].onChunk != nil || onChunk != nil },
		run: func(ctx context.Context, i int, chunk chat.EmitFunc) (any, bool) {
			r, ref := reqs[i], refs[i]
			call := r.call
			if r.stream || chunk != nil {
				call.Emit = func(e chat.Event) {
					if e.Event == chat.Done {
						return
					}
					if r.stream {
						ne := e
						ne.ID = ref.Call + "/" + e.ID
						if e.Agent == nil {
							ne.Agent = &ref
						} else {
							// A call the callee made: still its own, one level down.
							ne.Agent = &chat.AgentRef{ID: e.Agent.ID, Call: ref.Call + "/" + e.Agent.Call}
						}
						hc.emit(ne)
					}
					if chunk != nil {
						chunk(e)
					}
				}
			}
			if hc.Agents == nil {
				return AgentResult{AssistantID: call.AssistantID, Err: errors.New("calling other assistants is not available here")}, true
			}
			res := hc.Agents.CallAgent(ctx, call)
			return res, res.Err != nil
		},
		onChunk: func(i int, e chat.Event) (goja.Value, error) {
			if f := reqs[i].onChunk; f != nil {
				return f(goja.Undefined(), c.chunkJS(e))
			}
			return onChunk(goja.Undefined(), c.vm.ToValue(reqs[i].call.AssistantID), c.vm.ToValue(i), c.chunkJS(e))
		},
	})
	out := make([]goja.Value, len(reqs))
	for i := range out {
		out[i] = goja.Null()
	}
	for _, d := range got {
		out[d.idx] = c.agentResultJS(d.res.(AgentResult))
	}
	return out
}

// agentResultJS is Yao's caller.Result: {agent_id, response, content,
// error}.
func (c *call) agentResultJS(r AgentResult) goja.Value {
	o := map[string]any{"agent_id": r.AssistantID}
	if r.Err != nil {
		o["error"] = r.Err.Error()
		if ce := (*chat.Error)(nil); errors.As(r.Err, &ce) && ce.Code != "" {
			o["error"], o["code"] = ce.Message, ce.Code
		}
		return c.toJS(o)
	}
	o["content"] = r.Content
	completion := map[string]any{"content": r.Content, "role": chat.RoleAssistant, "finish_reason": r.FinishReason, "usage": r.Usage}
	resp := map[string]any{"chat_id": r.ChatID, "assistant_id": r.AssistantID, "completion": completion}
	if r.HasData {
		resp["next"] = map[string]any{"data": r.Data}
	}
	o["response"] = resp
	return c.toJS(o)
}

// chunkJS is an event as an onChunk callback gets it.
func (c *call) chunkJS(e chat.Event) goja.Value {
	m := map[string]any{"event": e.Event, "id": e.ID, "type": e.Type}
	if e.Text != "" {
		m["text"] = e.Text
	}
	if e.Props != nil {
		m["props"] = e.Props
	}
	if e.Agent != nil {
		m["agent"] = map[string]any{"id": e.Agent.ID, "call": e.Agent.Call}
	}
	return c.toJS(m)
}

// delegateFromJS parses a hook's {agent_id, messages?, options?}.
func (c *call) delegateFromJS(hook string, v goja.Value) (*Delegate, error) {
	if !isPlainObject(v) {
		return nil, c.resultErr("%s returned delegate: want {agent_id, messages, options?}, got %s", hook, typeName(v))
	}
	o := v.(*goja.Object)
	d := &Delegate{}
	for _, k := range o.Keys() {
		val := o.Get(k)
		switch k {
		case "agent_id":
			s, ok := asString(val)
			if !ok || s == "" {
				return nil, c.resultErr("%s returned delegate.agent_id: want an assistant id, got %s", hook, typeName(val))
			}
			d.AssistantID = s
		case "messages":
			if isNullish(val) {
				continue
			}
			msgs, _, err := c.messagesFromJS(val)
			if err != nil {
				return nil, c.resultErr("%s returned delegate.%v", hook, err)
			}
			d.Messages = msgs
		case "options":
			if isNullish(val) {
				continue
			}
			m, err := c.exportJSON(val)
			opts, isObj := m.(map[string]any)
			if err != nil || !isObj {
				return nil, c.resultErr("%s returned delegate.options: want an object", hook)
			}
			for ok, ov := range opts {
				switch ok {
				case "connector":
					s, isStr := ov.(string)
					if !isStr {
						return nil, c.resultErr("%s returned delegate.options.connector: want a connector id", hook)
					}
					d.Connector = s
				case "metadata":
					md, isMap := ov.(map[string]any)
					if !isMap {
						return nil, c.resultErr("%s returned delegate.options.metadata: want an object", hook)
					}
					d.Metadata = md
				case "mode", "skip":
				default:
					return nil, c.resultErr("%s returned delegate.options: unknown option %q (want connector, metadata)", hook, ok)
				}
			}
		default:
			return nil, c.resultErr("%s returned delegate: unknown field %q (want %s)", hook, k, strings.Join(agentDelegateKeys, ", "))
		}
	}
	if d.AssistantID == "" {
		return nil, c.resultErr("%s returned delegate without agent_id: name the assistant to hand the turn to", hook)
	}
	return d, nil
}

func anySlice(vs []goja.Value) []any {
	out := make([]any, len(vs))
	for i, v := range vs {
		out[i] = v
	}
	return out
}
