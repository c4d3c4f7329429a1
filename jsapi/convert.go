package jsapi

import (
	"cmp"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/dop251/goja"
	"github.com/tidwall/gjson"

	"github.com/agentbox/agentbox/chat"
	"github.com/agentbox/agentbox/executor"
)

func decodeBase64(s string) ([]byte, error) { return base64.StdEncoding.DecodeString(s) }

// asString returns v when it is a string primitive (never exporting an
// object just to look at its type).
func asString(v goja.Value) (string, bool) {
	if v == nil {
		return "", false
	}
	if _, isObj := v.(*goja.Object); isObj {
		return "", false
	}
	s, ok := v.Export().(string)
	return s, ok
}

// asBool returns v when it is a boolean primitive.
func asBool(v goja.Value) (bool, bool) {
	if v == nil {
		return false, false
	}
	if _, isObj := v.(*goja.Object); isObj {
		return false, false
	}
	b, ok := v.Export().(bool)
	return b, ok
}

func isNullish(v goja.Value) bool { return v == nil || goja.IsUndefined(v) || goja.IsNull(v) }

func isFunction(v goja.Value) bool {
	_, ok := goja.AssertFunction(v)
	return ok
}

// isPlainObject reports an object that is not an array or a function.
func isPlainObject(v goja.Value) bool {
	o, ok := v.(*goja.Object)
	return ok && o.ClassName() == "Object" && !isFunction(v)
}

// typeName describes a JS value for error messages: its type as
// t.assert.Type names it, with an article.
func typeName(v goja.Value) string {
	switch t := jsType(v); t {
	case "undefined", "null":
		return t
	case "unknown":
		return v.ExportType().String()
	case "array", "object":
		return "an " + t
	default:
		return "a " + t
	}
}

// parseJSON turns JSON text into native JS values like JSON.parse, keeping
// object key order, without the allocations of goja's JSON.parse decoder.
// Invalid JSON gives null.
func (c *call) parseJSON(raw []byte) goja.Value {
	if !gjson.ValidBytes(raw) {
		return goja.Null()
	}
	return c.fromGJSON(gjson.ParseBytes(raw))
}

func (c *call) fromGJSON(r gjson.Result) goja.Value {
	switch r.Type {
	case gjson.False:
		return c.vm.ToValue(false)
	case gjson.True:
		return c.vm.ToValue(true)
	case gjson.Number:
		return c.vm.ToValue(r.Num)
	case gjson.String:
		return c.vm.ToValue(r.Str)
	case gjson.JSON:
		if r.IsArray() {
			var items []any
			r.ForEach(func(_, v gjson.Result) bool {
				items = append(items, c.fromGJSON(v))
				return true
			})
			return c.vm.NewArray(items...)
		}
		o := c.vm.NewObject()
		r.ForEach(func(k, v gjson.Result) bool {
			setProp(o, k.Str, c.fromGJSON(v))
			return true
		})
		return o
	}
	return goja.Null()
}

// setProp defines an own data property, as JSON.parse does: a key named
// "__proto__" becomes a property, not a new prototype.
func setProp(o *goja.Object, key string, v goja.Value) {
	if key == "__proto__" {
		_ = o.DefineDataProperty(key, v, goja.FLAG_TRUE, goja.FLAG_TRUE, goja.FLAG_TRUE)
		return
	}
	_ = o.Set(key, v)
}

// stringify is JSON.stringify(v); ok is false for values JSON cannot hold
// (undefined, functions, symbols).
func (c *call) stringify(v goja.Value) (s string, ok bool, err error) {
	out, err := c.jsonString(goja.Undefined(), v)
	if err != nil {
		var ex *goja.Exception
		if errors.As(err, &ex) {
			if o := objectOf(ex.Value()); o != nil {
				if m := stringProp(o, "message"); m != "" {
					return "", false, errors.New(m)
				}
			}
		}
		return "", false, err
	}
	if goja.IsUndefined(out) {
		return "", false, nil
	}
	return out.String(), true, nil
}

// exportJSON converts a JS value to its JSON-decoded Go form (maps, slices,
// float64, string, bool, nil), the way JSON.stringify sees it.
func (c *call) exportJSON(v goja.Value) (any, error) {
	if isNullish(v) {
		return nil, nil
	}
	s, ok, err := c.stringify(v)
	if err != nil {
		return nil, err
	}
	if !ok {
		return nil, fmt.Errorf("%s cannot be represented in JSON", typeName(v))
	}
	var out any
	if err := json.Unmarshal([]byte(s), &out); err != nil {
		return nil, err
	}
	return out, nil
}

// toJS copies a Go value into native JS values, so a hook that changes what
// it was given never changes the caller's maps.
func (c *call) toJS(v any) goja.Value {
	vm := c.vm
	switch x := v.(type) {
	case nil:
		return goja.Null()
	case string, bool, int, int8, int16, int32, int64, uint, uint8, uint16, uint32, uint64, float32, float64:
		return vm.ToValue(x)
	case json.RawMessage:
		if len(x) == 0 {
			return goja.Null()
		}
		return c.parseJSON(x)
	case time.Time:
		return vm.ToValue(x.UTC().Format(time.RFC3339Nano))
	case map[string]any:
		o := vm.NewObject()
		for k, e := range x {
			setProp(o, k, c.toJS(e))
		}
		return o
	case map[string]string:
		o := vm.NewObject()
		for k, e := range x {
			setProp(o, k, vm.ToValue(e))
		}
		return o
	case []any:
		items := make([]any, len(x))
		for i, e := range x {
			items[i] = c.toJS(e)
		}
		return vm.NewArray(items...)
	case []string:
		items := make([]any, len(x))
		for i, e := range x {
			items[i] = e
		}
		return vm.NewArray(items...)
	case goja.Value:
		return x
	}
	b, err := json.Marshal(v)
	if err != nil {
		return goja.Undefined()
	}
	return c.parseJSON(b)
}

// optionsJS is where a turn's options cross into JS: the hook gets a plain
// object of their JSON form, of its own.
func (c *call) optionsJS(o chat.Options) goja.Value {
	b, err := json.Marshal(o)
	if err != nil {
		// Options hold only JSON values; a raw option is valid JSON.
		return c.vm.NewObject()
	}
	return c.parseJSON(b)
}

// optionsFromJS is where options a hook returned come back: their JSON
// form, decoded strictly (a problem names the field under root).
func (c *call) optionsFromJS(v goja.Value, root string) (chat.Options, error) {
	s, ok, err := c.stringify(v)
	if err != nil || !ok {
		if err == nil {
			err = fmt.Errorf("%s cannot be represented in JSON", typeName(v))
		}
		return chat.Options{}, fmt.Errorf("options that are not JSON: %v", err)
	}
	return chat.DecodeOptions(root, []byte(s))
}

func (c *call) messagesJS(msgs []chat.Message) goja.Value {
	items := make([]any, len(msgs))
	for i, m := range msgs {
		o := c.vm.NewObject()
		_ = o.Set("role", m.Role)
		if len(m.Parts) > 0 {
			// Yao's content parts: a message with images is its parts.
			_ = o.Set("content", c.partsJS(m.Parts))
		} else {
			_ = o.Set("content", m.Content)
		}
		if m.Name != "" {
			_ = o.Set("name", m.Name)
		}
		if m.ToolCallID != "" {
			_ = o.Set("tool_call_id", m.ToolCallID)
		}
		if len(m.ToolCalls) > 0 {
			calls := make([]any, len(m.ToolCalls))
			for j, tc := range m.ToolCalls {
				fn := c.vm.NewObject()
				_ = fn.Set("name", tc.Name)
				_ = fn.Set("arguments", string(tc.Input))
				co := c.vm.NewObject()
				_ = co.Set("id", tc.ID)
				_ = co.Set("type", "function")
				_ = co.Set("function", fn)
				calls[j] = co
			}
			_ = o.Set("tool_calls", c.vm.NewArray(calls...))
		}
		items[i] = o
	}
	return c.vm.NewArray(items...)
}

// messagesFromJS checks and converts a messages array a hook returned.
// Fields a message may have in Yao but that do not reach the model here
// (reasoning_content, refusal) are dropped; unknown lists the others,
// ignored as Yao ignores them.
func (c *call) messagesFromJS(v goja.Value) (_ []chat.Message, unknown []string, _ error) {
	o, ok := v.(*goja.Object)
	if !ok || o.ClassName() != "Array" {
		return nil, nil, fmt.Errorf("messages: want an array, got %s", typeName(v))
	}
	n := int(o.Get("length").ToInteger())
	out := make([]chat.Message, 0, n)
	for i := range n {
		e := o.Get(fmt.Sprint(i))
		if !isPlainObject(e) {
			return nil, nil, fmt.Errorf("messages[%d]: want an object {role, content}, got %s", i, typeName(e))
		}
		eo := e.(*goja.Object)
		var m chat.Message
		for _, k := range eo.Keys() {
			val := eo.Get(k)
			var dst *string
			switch k {
			case "role":
				dst = &m.Role
			case "content":
				dst = &m.Content
			case "name":
				dst = &m.Name
			case "tool_call_id":
				dst = &m.ToolCallID
			case "tool_calls":
				calls, err := toolCallsFromJS(fmt.Sprintf("messages[%d].tool_calls", i), val)
				if err != nil {
					return nil, nil, err
				}
				m.ToolCalls = calls
				continue
			case "reasoning_content", "refusal":
				continue
			default:
				unknown = append(unknown, fmt.Sprintf("messages[%d].%s", i, k))
				continue
			}
			if isNullish(val) && k != "role" && k != "content" {
				continue
			}
			s, isStr := asString(val)
			if !isStr && k == "content" {
				// Yao's content parts: [{type: "text", text}, {type:
				// "image_url", image_url: {url, detail}}, ...].
				parts, err := partsFromJS(val)
				if err != nil {
					return nil, nil, fmt.Errorf("messages[%d].content: %v", i, err)
				}
				s, isStr = chat.TextOf(parts), true
				for _, p := range parts {
					if p.Type == chat.PartImage {
						m.Parts = parts
						break
					}
				}
			}
			if !isStr {
				return nil, nil, fmt.Errorf("messages[%d].%s: want a string, got %s", i, k, typeName(val))
			}
			*dst = s
		}
		switch m.Role {
		case chat.RoleSystem, chat.RoleDeveloper, chat.RoleUser, chat.RoleAssistant, chat.RoleTool:
		case "":
			return nil, nil, fmt.Errorf("messages[%d]: role is missing", i)
		default:
			return nil, nil, fmt.Errorf("messages[%d].role: %q is not one of system, developer, user, assistant, tool", i, m.Role)
		}
		out = append(out, m)
	}
	return out, unknown, nil
}

// toolCallsFromJS converts an assistant message's tool_calls, in OpenAI's
// shape: [{id, type: "function", function: {name, arguments}}], where
// arguments is JSON text.
func toolCallsFromJS(where string, v goja.Value) ([]chat.ToolCall, error) {
	if isNullish(v) {
		return nil, nil
	}
	o, ok := v.(*goja.Object)
	if !ok || o.ClassName() != "Array" {
		return nil, fmt.Errorf("%s: want an array, got %s", where, typeName(v))
	}
	n := int(o.Get("length").ToInteger())
	out := make([]chat.ToolCall, 0, n)
	for i := range n {
		p := fmt.Sprintf("%s[%d]", where, i)
		e := o.Get(fmt.Sprint(i))
		if !isPlainObject(e) {
			return nil, fmt.Errorf("%s: want {id, type: \"function\", function: {name, arguments}}, got %s", p, typeName(e))
		}
		eo := e.(*goja.Object)
		id, _ := asString(eo.Get("id"))
		fv := eo.Get("function")
		if !isPlainObject(fv) {
			return nil, fmt.Errorf("%s.function: want {name, arguments}, got %s", p, typeName(fv))
		}
		fo := fv.(*goja.Object)
		name, _ := asString(fo.Get("name"))
		args, isStr := asString(fo.Get("arguments"))
		switch {
		case id == "" || name == "":
			return nil, fmt.Errorf("%s: id and function.name are required", p)
		case !isStr && !isNullish(fo.Get("arguments")):
			return nil, fmt.Errorf("%s.function.arguments: want JSON text, got %s", p, typeName(fo.Get("arguments")))
		}
		if args == "" {
			args = "{}"
		}
		out = append(out, chat.ToolCall{ID: id, Name: name, Input: chat.RawJSON(args)})
	}
	return out, nil
}

// partsJS is a message's parts as Yao gives them to hooks:
// [{type: "text", text}, {type: "image_url", image_url: {url, detail}}].
func (c *call) partsJS(parts []chat.Part) goja.Value {
	items := make([]any, len(parts))
	for i, p := range parts {
		o := c.vm.NewObject()
		_ = o.Set("type", p.Type)
		switch {
		case p.Type == chat.PartImage && p.ImageURL != nil:
			im := c.vm.NewObject()
			_ = im.Set("url", p.ImageURL.URL)
			if p.ImageURL.Detail != "" {
				_ = im.Set("detail", p.ImageURL.Detail)
			}
			_ = o.Set("image_url", im)
		default:
			_ = o.Set("text", p.Text)
		}
		items[i] = o
	}
	return c.vm.NewArray(items...)
}

// partsFromJS reads content parts a hook returned: text parts and
// image_url parts (an object with url and detail, or the URL alone). The
// images are checked where the turn takes them (the pipeline).
func partsFromJS(v goja.Value) ([]chat.Part, error) {
	o, ok := v.(*goja.Object)
	if !ok || o.ClassName() != "Array" {
		return nil, fmt.Errorf("want a string or a list of content parts, got %s", typeName(v))
	}
	n := int(o.Get("length").ToInteger())
	parts := make([]chat.Part, 0, n)
	for i := range n {
		p, ok := o.Get(fmt.Sprint(i)).(*goja.Object)
		if !ok {
			return nil, fmt.Errorf(`part %d: want {type: "text", text} or {type: "image_url", image_url: {url}}`, i)
		}
		typ, _ := asString(p.Get("type"))
		switch typ {
		case chat.PartText:
			text, isStr := asString(p.Get("text"))
			if !isStr {
				return nil, fmt.Errorf("part %d: text: want a string, got %s", i, typeName(p.Get("text")))
			}
			parts = append(parts, chat.Part{Type: chat.PartText, Text: text})
		case chat.PartImage:
			iv := p.Get("image_url")
			url, isStr := asString(iv)
			var detail string
			if io, ok := iv.(*goja.Object); ok && !isStr {
				url, isStr = asString(io.Get("url"))
				detail, _ = asString(io.Get("detail"))
			}
			if !isStr || url == "" {
				return nil, fmt.Errorf(`part %d: image_url: want {url: "data:image/png;base64,..."}, got %s`, i, typeName(iv))
			}
			parts = append(parts, chat.Part{Type: chat.PartImage, ImageURL: &chat.ImageURL{URL: url, Detail: detail}})
		default:
			return nil, fmt.Errorf("part %d: type %q: only text and image_url parts are supported", i, typ)
		}
	}
	return parts, nil
}

// completionJS is Yao's completion object that is also the answer: a
// String object holding the text (so agentbox's hooks that treat
// completion as the text keep working: template literals, string methods,
// JSON.stringify) with Yao's fields on it (id, object, created, model,
// role, content, tool_calls, reasoning_content, finish_reason, usage).
func (c *call) completionJS(cp Completion) goja.Value {
	o, err := c.vm.New(c.stringCtor, c.vm.ToValue(cp.Content))
	if err != nil {
		return c.vm.ToValue(cp.Content)
	}
	set := func(k string, v any) { _ = o.Set(k, v) }
	set("id", cp.ID)
	set("object", "chat.completion")
	set("created", cp.Created)
	set("model", cp.Model)
	set("role", chat.RoleAssistant)
	set("content", cp.Content)
	set("refusal", goja.Null())
	if cp.ReasoningContent != "" {
		set("reasoning_content", cp.ReasoningContent)
	}
	set("finish_reason", cp.FinishReason)
	calls := make([]any, len(cp.ToolCalls))
	for i, tc := range cp.ToolCalls {
		fn := c.vm.NewObject()
		_ = fn.Set("name", tc.Name)
		_ = fn.Set("arguments", tc.Arguments)
		call := c.vm.NewObject()
		_ = call.Set("id", tc.ID)
		_ = call.Set("type", "function")
		_ = call.Set("function", fn)
		calls[i] = call
	}
	set("tool_calls", c.vm.NewArray(calls...))
	usage := c.vm.NewObject()
	in := cp.Usage.InputTokens + cp.Usage.CacheReadTokens + cp.Usage.CacheCreationTokens
	_ = usage.Set("prompt_tokens", in)
	_ = usage.Set("completion_tokens", cp.Usage.OutputTokens)
	_ = usage.Set("total_tokens", in+cp.Usage.OutputTokens)
	set("usage", usage)
	return o
}

func (c *call) nextPayloadJS(p NextPayload) goja.Value {
	o := c.vm.NewObject()
	_ = o.Set("messages", c.messagesJS(p.Messages))
	_ = o.Set("completion", c.completionJS(p.Completion))
	_ = o.Set("tools", c.toolsJS(p.Tools))
	if p.Error != "" {
		_ = o.Set("error", p.Error)
	} else {
		_ = o.Set("error", goja.Null())
	}
	return o
}

func (c *call) toolsJS(tools []executor.ToolCall) goja.Value {
	items := make([]any, len(tools))
	for i, t := range tools {
		o := c.vm.NewObject()
		_ = o.Set("id", t.ID)
		_ = o.Set("name", t.Name)
		if len(t.Input) > 0 && json.Valid(t.Input) {
			_ = o.Set("input", c.parseJSON(t.Input))
		} else {
			_ = o.Set("input", goja.Null())
		}
		_ = o.Set("result", t.Result)
		_ = o.Set("is_error", t.IsError)
		// Yao's names for the same: toolcall_id, server, tool, arguments,
		// error.
		_ = o.Set("toolcall_id", t.ID)
		server, tool := t.Server, cmp.Or(t.Tool, t.Name)
		if rest, ok := strings.CutPrefix(t.Name, "mcp__"); ok && t.Tool == "" {
			if s, name, ok := strings.Cut(rest, "__"); ok {
				server, tool = s, name
			}
		}
		_ = o.Set("server", server)
		_ = o.Set("tool", tool)
		_ = o.Set("arguments", o.Get("input"))
		if t.IsError {
			_ = o.Set("error", t.Result)
		} else {
			_ = o.Set("error", "")
		}
		items[i] = o
	}
	return c.vm.NewArray(items...)
}
