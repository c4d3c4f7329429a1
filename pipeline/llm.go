package pipeline

import (
	"cmp"
	"context"
	"encoding/json"
	"fmt"
	"maps"
	"slices"
	"strings"

	"github.com/agentbox/agentbox/chat"
	"github.com/agentbox/agentbox/connector"
	"github.com/agentbox/agentbox/jsapi"
)

// Yao's ctx.llm options that are not model options: the hook's own
// onChunk (jsapi takes it out) and stream (every call streams).
var llmCallOnly = []string{"onChunk", "stream"}

// CallLLM is a hook's ctx.llm call (jsapi.LLM) within t: the usage of
// the call counts in t's (its done event and usage record).
func (t *turn) CallLLM(ctx context.Context, call jsapi.LLMCall) jsapi.LLMResult {
	res := t.p.CallLLM(ctx, call)
	t.mu.Lock()
	t.hookUsage.Add(res.Usage)
	t.mu.Unlock()
	return res
}

var (
	_ jsapi.LLM = (*turn)(nil)
	_ jsapi.LLM = (*Pipeline)(nil)
)

// takeHookUsage returns the usage of t's hooks' ctx.llm calls so far and
// starts counting again.
func (t *turn) takeHookUsage() chat.Usage {
	t.mu.Lock()
	defer t.mu.Unlock()
	u := t.hookUsage
	t.hookUsage = chat.Usage{}
	return u
}

// CallLLM streams one completion of a connector of the app for a hook
// (ctx.llm), bounded by ctx and through the connector's breaker, as a
// direct assistant's model call goes: the connector's key resolved from
// the environment, Yao's options adjusted to what the model takes. A
// script test's ctx.llm calls it outside any turn.
func (p *Pipeline) CallLLM(ctx context.Context, call jsapi.LLMCall) jsapi.LLMResult {
	res := jsapi.LLMResult{Connector: call.Connector}
	app := p.App()
	c, ok := app.Connectors[call.Connector]
	if !ok {
		res.Err = &chat.Error{Code: chat.ErrInvalidRequest, Message: fmt.Sprintf("connector %q does not exist (the app has %s)",
			call.Connector, strings.Join(slices.Sorted(maps.Keys(app.Connectors)), ", "))}
		return res
	}
	r, err := c.Resolve()
	if err != nil {
		res.Err = &chat.Error{Code: chat.ErrAuth, Message: err.Error(), Err: err}
		return res
	}
	opts, err := llmOptions(call.Options)
	if err != nil {
		res.Err = err
		return res
	}
	model := cmp.Or(opts.Model, r.Model)
	caps := r.Capabilities
	if model != r.Model {
		caps = c.ModelCapabilities(model)
	}
	mo, _ := connector.YaoOptions(r.Type, caps, opts)
	mo.Model = ""
	cl, err := connector.New(connector.Config{Type: r.Type, Host: r.Host, Key: r.Key, Model: model, Extra: r.Extra, Script: r.Script,
		AuthMode: r.AuthMode, APIVersion: r.APIVersion, Params: r.Params, Capabilities: &caps, Breaker: p.breakers.Get(call.Connector)})
	if err != nil {
		res.Err = &chat.Error{Code: chat.ErrInternal, Message: "connector " + call.Connector + ": " + err.Error(), Err: err}
		return res
	}
	emit := call.Emit
	if emit == nil {
		emit = func(chat.Event) {}
	}
	resp, err := cl.Stream(ctx, &connector.Request{Model: model, Messages: call.Messages, Options: mo}, emit)
	if resp != nil {
		res.Model, res.Content, res.Thinking, res.ToolCalls = cmp.Or(resp.Model, model), resp.Content, resp.Thinking, resp.ToolCalls
		res.FinishReason, res.Usage = chat.FinishReason(resp.FinishReason), resp.Usage
		if r.Type == connector.TypeScripted {
			res.Usage.CostUSD = 0
		}
	}
	res.Err = err
	return res
}

// llmOptions are a ctx.llm call's options as model options, strictly (an
// unknown option or one of the wrong type is an error naming it).
func llmOptions(in map[string]any) (chat.ModelOptions, error) {
	o := make(map[string]any, len(in))
	for k, v := range in {
		if !slices.Contains(llmCallOnly, k) {
			o[k] = v
		}
	}
	if len(o) == 0 {
		return chat.ModelOptions{}, nil
	}
	b, err := json.Marshal(o)
	if err != nil {
		return chat.ModelOptions{}, &chat.Error{Code: chat.ErrInvalidRequest, Message: "options: " + err.Error(), Err: err}
	}
	mo, err := chat.DecodeModelOptions("options", b)
	if err != nil {
		return chat.ModelOptions{}, &chat.Error{Code: chat.ErrInvalidRequest, Message: err.Error(), Err: err}
	}
	return mo, nil
}
