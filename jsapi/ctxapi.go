package jsapi

import (
	"cmp"
	"encoding/json"
	"fmt"
	"log/slog"
	"math"
	"slices"

	"github.com/dop251/goja"

	"github.com/agentbox/agentbox/chat"
)

// Members of the objects the ctx API builds. agentbox.d.ts declares the
// same members; TestDeclarationsMatch keeps the two in sync.
var (
	ctxFields      = []string{"chat_id", "assistant_id", "user_id", "locale", "theme", "referer", "accept", "route", "client", "authorized", "metadata", "memory", "sandbox", "workspace", "computer", "agent", "llm", "mcp"}
	ctxMethods     = []string{"Send", "SendStream", "Append", "Replace", "Merge", "Set", "End", "EndBlock", "MessageID", "BlockID", "ThreadID"}
	memoryMethods  = []string{"Get", "Set", "Del", "Has", "Keys", "Len", "Clear", "Incr", "Decr", "GetDel"}
	memoryKeys     = []string{string(NamespaceUser), string(NamespaceTeam), string(NamespaceChat), string(NamespaceContext)}
	messageFields  = []string{"type", "props", "id", "message_id", "block_id", "thread_id"}
	sandboxMembers = []string{"workdir", "ReadFile", "WriteFile", "ListDir", "Exec"}
	execOptionKeys = []string{"cwd", "env", "timeout", "stdin", "shell"}
)

type nativeFn = func(goja.FunctionCall) goja.Value

// ctxKeys are the members of ctx, in the order Object.keys lists them.
var ctxKeys = append(slices.Clone(ctxFields), ctxMethods...)

// ctxObject builds the ctx argument: a fresh object every call, whose
// members are made when the hook first touches them.
func (c *call) ctxObject() *goja.Object {
	hc := c.hc
	return c.newLazy(ctxKeys, func(key string) goja.Value {
		switch key {
		case "chat_id":
			return c.vm.ToValue(hc.ChatID)
		case "assistant_id":
			return c.vm.ToValue(hc.AssistantID)
		case "user_id":
			return c.vm.ToValue(hc.UserID)
		case "locale":
			return c.vm.ToValue(hc.Locale)
		case "theme":
			return c.vm.ToValue(hc.Client.Theme)
		case "referer":
			return c.vm.ToValue(cmp.Or(hc.Client.Referer, "api"))
		case "accept":
			return c.vm.ToValue(cmp.Or(hc.Client.Accept, "standard"))
		case "route":
			return c.vm.ToValue(hc.Client.Route)
		case "client":
			return c.toJS(map[string]any{"type": cmp.Or(hc.Client.Type, "web"), "user_agent": hc.Client.UserAgent, "ip": hc.Client.IP})
		case "authorized":
			// Yao's authorized info, of what agentbox knows: the
			// authenticated user and team.
			auth := map[string]any{"user_id": hc.UserID}
			if hc.TeamID != "" {
				auth["team_id"] = hc.TeamID
			}
			return c.toJS(auth)
		case "metadata":
			if hc.Metadata == nil {
				return c.vm.NewObject()
			}
			return c.toJS(hc.Metadata)
		case "memory":
			return c.newLazy(memoryKeys, func(ns string) goja.Value { return c.memoryObject(Namespace(ns)) })
		case "sandbox":
			if hc.Sandbox == nil {
				return goja.Undefined()
			}
			return c.sandboxObject()
		case "workspace":
			if hc.Sandbox == nil {
				return goja.Undefined()
			}
			return c.workspaceObject()
		case "computer":
			if hc.Sandbox == nil {
				return goja.Undefined()
			}
			return c.computerObject()
		case "agent":
			return c.agentObject()
		case "llm":
			return c.llmObject()
		case "mcp":
			return c.mcpObject()
		case "Send":
			return c.vm.ToValue(nativeFn(func(fc goja.FunctionCall) goja.Value { return c.send("Send", fc, false) }))
		case "SendStream":
			return c.vm.ToValue(nativeFn(func(fc goja.FunctionCall) goja.Value { return c.send("SendStream", fc, true) }))
		case "Append":
			return c.vm.ToValue(nativeFn(c.appendMsg))
		case "Replace":
			return c.vm.ToValue(nativeFn(c.replaceMsg))
		case "Merge":
			return c.vm.ToValue(nativeFn(func(fc goja.FunctionCall) goja.Value { return c.update("Merge", chat.Merge, fc) }))
		case "Set":
			return c.vm.ToValue(nativeFn(func(fc goja.FunctionCall) goja.Value { return c.update("Set", chat.Set, fc) }))
		case "End":
			return c.vm.ToValue(nativeFn(c.endMsg))
		case "EndBlock":
			return c.vm.ToValue(nativeFn(c.endBlock))
		case "MessageID", "BlockID", "ThreadID":
			prefix := map[string]string{"MessageID": "hook_", "BlockID": "block_", "ThreadID": "thread_"}[key]
			return c.vm.ToValue(nativeFn(func(goja.FunctionCall) goja.Value {
				hc.mu.Lock()
				defer hc.mu.Unlock()
				return c.vm.ToValue(hc.newID(prefix))
			}))
		}
		return goja.Undefined()
	})
}

// outMsg is a client message as a hook gives it.
type outMsg struct {
	id, typ, text, block string
	props                map[string]any
}

// message parses Send/SendStream/Replace's message argument: {type, props,
// id?} or a string (a text message).
func (c *call) message(fn string, v goja.Value, allowID bool) outMsg {
	if s, ok := asString(v); ok {
		return outMsg{typ: chat.TypeText, text: s, props: map[string]any{"content": s}}
	}
	if !isPlainObject(v) {
		c.throw(argErr("%s: want a message {type, props} or a string, got %s", fn, typeName(v)), "")
	}
	o := v.(*goja.Object)
	m := outMsg{typ: chat.TypeText}
	for _, k := range o.Keys() {
		val := o.Get(k)
		switch k {
		case "type":
			s, ok := asString(val)
			if !ok || s == "" {
				c.throw(argErr("%s: message type: want a non-empty string, got %s", fn, typeName(val)), "")
			}
			m.typ = s
		case "props":
			if isNullish(val) {
				continue
			}
			if !isPlainObject(val) {
				c.throw(argErr("%s: message props: want an object, got %s", fn, typeName(val)), "")
			}
			p, err := c.exportJSON(val)
			if err != nil {
				c.throw(argErr("%s: message props are not JSON: %v", fn, err), "")
			}
			m.props, _ = p.(map[string]any)
		case "block_id", "thread_id":
			s, ok := asString(val)
			if !ok {
				c.throw(argErr("%s: message %s: want a string, got %s", fn, k, typeName(val)), "")
			}
			if k == "block_id" {
				m.block = s
			}
		case "id", "message_id":
			s, ok := asString(val)
			if !allowID || !ok || s == "" {
				if !allowID {
					c.throw(argErr("%s: the message id is the first argument, not a field", fn), "")
				}
				c.throw(argErr("%s: message id: want a non-empty string, got %s", fn, typeName(val)), "")
			}
			m.id = s
		default:
			c.throw(argErr("%s: unknown message field %q (want %v)", fn, k, messageFields), "")
		}
	}
	// The text clients show: content for text-like messages, message for
	// loading and notices.
	for _, k := range []string{"content", "message", "text"} {
		if s, ok := m.props[k].(string); ok {
			m.text = s
			break
		}
	}
	return m
}

func (c *call) send(fn string, fc goja.FunctionCall, stream bool) goja.Value {
	m := c.message(fn, fc.Argument(0), true)
	if b := fc.Argument(1); !isNullish(b) && m.block == "" {
		// Yao's second argument: the block the message belongs to (the
		// message's own block_id wins).
		s, ok := asString(b)
		if !ok {
			c.throw(argErr("%s: the block id (second argument) must be a string, got %s", fn, typeName(b)), "")
		}
		m.block = s
	}
	hc := c.hc
	hc.mu.Lock()
	if m.id == "" {
		m.id = hc.nextID()
	}
	if _, dup := hc.msgs[m.id]; dup {
		hc.mu.Unlock()
		c.throw(argErr("%s: message id %q is already used", fn, m.id), "")
	}
	if hc.msgs == nil {
		hc.msgs = map[string]*hookMsg{}
	}
	hc.msgs[m.id] = &hookMsg{typ: m.typ, open: stream}
	if stream {
		hc.open = append(hc.open, m.id)
	}
	hc.mu.Unlock()
	hc.emit(chat.Event{Event: chat.Start, ID: m.id, Type: m.typ, Text: m.text, Props: m.props, Block: m.block})
	if !stream {
		hc.emit(chat.Event{Event: chat.End, ID: m.id, Type: m.typ})
	}
	return c.vm.ToValue(m.id)
}

// msgID checks a message id argument and returns the message's state.
func (c *call) msgID(fn string, v goja.Value) (string, hookMsg) {
	id, ok := asString(v)
	if !ok || id == "" {
		c.throw(argErr("%s: want a message id (what Send or SendStream returned), got %s", fn, typeName(v)), "")
	}
	c.hc.mu.Lock()
	m := c.hc.msgs[id]
	var st hookMsg
	if m != nil {
		st = *m
	}
	c.hc.mu.Unlock()
	if m == nil {
		c.throw(argErr("%s: no message %q was sent by this request's hooks", fn, id), "")
	}
	return id, st
}

// appendMsg is Yao's ctx.Append(id, content, path?): text (a string, or a
// message whose props.content is one) added to a streaming message's text
// is a delta; anything else, or on a message that has ended, an append
// event at path (default props.content).
func (c *call) appendMsg(fc goja.FunctionCall) goja.Value {
	id, st := c.msgID("Append", fc.Argument(0))
	path := c.deltaPath("Append", fc.Argument(2), false)
	v := fc.Argument(1)
	var value any
	if s, ok := asString(v); ok {
		value = s
	} else if isPlainObject(v) {
		m := c.message("Append", v, false)
		if content, has := m.props["content"]; has && len(m.props) == 1 && (path == "" || path == "props.content") {
			value = content
		} else {
			value = m.props
			if path == "" {
				path = "props"
			}
		}
	} else {
		c.throw(argErr("Append: want text, or a message {type, props}, got %s", typeName(v)), "")
	}
	if text, isText := value.(string); isText && st.open && (path == "" || path == "props.content") {
		c.hc.emit(chat.Event{Event: chat.Delta, ID: id, Type: st.typ, Text: text})
		return c.vm.ToValue(id)
	}
	c.hc.emit(chat.Event{Event: chat.Append, ID: id, Type: st.typ, Path: cmp.Or(path, "props.content"), Value: value})
	return c.vm.ToValue(id)
}

// update is Yao's ctx.Merge(id, data, path?) (data merged into the object
// at path, default props) and ctx.Set(id, data, path) (data put at path).
// data is a value, or a message whose props are the value.
func (c *call) update(fn, event string, fc goja.FunctionCall) goja.Value {
	id, st := c.msgID(fn, fc.Argument(0))
	path := c.deltaPath(fn, fc.Argument(2), event == chat.Set)
	v := fc.Argument(1)
	var value any
	switch {
	case isPlainObject(v) && (v.(*goja.Object).Get("props") != nil || v.(*goja.Object).Get("type") != nil):
		m := c.message(fn, v, false)
		value = m.props
	default:
		x, err := c.exportJSON(v)
		if err != nil {
			c.throw(argErr("%s: data is not JSON: %v", fn, err), "")
		}
		value = x
	}
	if event == chat.Merge {
		if _, isObj := value.(map[string]any); !isObj {
			c.throw(argErr("Merge: want an object to merge, got %s", typeName(v)), "")
		}
		path = cmp.Or(path, "props")
	}
	c.hc.emit(chat.Event{Event: event, ID: id, Type: st.typ, Path: path, Value: value})
	return c.vm.ToValue(id)
}

// deltaPath reads the path argument of Append, Merge and Set: Yao's dotted
// path from the message ("props.items").
func (c *call) deltaPath(fn string, v goja.Value, required bool) string {
	if isNullish(v) {
		if required {
			c.throw(argErr("%s: want a path as the third argument (\"props.status\")", fn), "")
		}
		return ""
	}
	s, ok := asString(v)
	if !ok || required && s == "" {
		c.throw(argErr("%s: path: want a dotted path such as \"props.status\", got %s", fn, typeName(v)), "")
	}
	return s
}

func (c *call) replaceMsg(fc goja.FunctionCall) goja.Value {
	id, _ := c.msgID("Replace", fc.Argument(0))
	m := c.message("Replace", fc.Argument(1), false)
	c.hc.mu.Lock()
	if st := c.hc.msgs[id]; st != nil {
		st.typ = m.typ
	}
	c.hc.mu.Unlock()
	c.hc.emit(chat.Event{Event: chat.Replace, ID: id, Type: m.typ, Text: m.text, Props: m.props})
	return c.vm.ToValue(id)
}

// endMsg is ctx.End(id, final?): final text is appended before the end.
func (c *call) endMsg(fc goja.FunctionCall) goja.Value {
	id, _ := c.msgID("End", fc.Argument(0))
	final := ""
	if v := fc.Argument(1); !isNullish(v) {
		s, ok := asString(v)
		if !ok {
			c.throw(argErr("End: final content: want a string, got %s", typeName(v)), "")
		}
		final = s
	}
	hc := c.hc
	hc.mu.Lock()
	st := hc.msgs[id]
	wasOpen := st.open
	st.open = false
	typ := st.typ
	if i := slices.Index(hc.open, id); i >= 0 {
		hc.open = slices.Delete(hc.open, i, i+1)
	}
	hc.mu.Unlock()
	// Ending twice (or ending a whole message) is harmless.
	if wasOpen {
		if final != "" {
			hc.emit(chat.Event{Event: chat.Delta, ID: id, Type: typ, Text: final})
		}
		hc.emit(chat.Event{Event: chat.End, ID: id, Type: typ})
	}
	return c.vm.ToValue(id)
}

// endBlock is ctx.EndBlock(blockId): the block's messages are complete.
func (c *call) endBlock(fc goja.FunctionCall) goja.Value {
	id, ok := asString(fc.Argument(0))
	if !ok || id == "" {
		c.throw(argErr("EndBlock: want a block id (what BlockID returned, or the one given to Send), got %s", typeName(fc.Argument(0))), "")
	}
	c.hc.emit(chat.Event{Event: chat.BlockEnd, ID: id, Type: chat.TypeBlock})
	return goja.Undefined()
}

// memoryObject builds ctx.memory.<ns>.
func (c *call) memoryObject(ns Namespace) *goja.Object {
	return c.newLazy(memoryMethods, func(key string) goja.Value {
		return c.vm.ToValue(c.memoryMethod(ns, key))
	})
}

func (c *call) memoryMethod(ns Namespace, name string) nativeFn {
	switch name {
	case "Get":
		return func(fc goja.FunctionCall) goja.Value {
			key := c.memKey(ns, "Get", fc.Argument(0))
			raw, ok := c.memGet(ns, key)
			if !ok {
				return goja.Undefined()
			}
			return c.parseJSON(raw)
		}
	case "Has":
		return func(fc goja.FunctionCall) goja.Value {
			key := c.memKey(ns, "Has", fc.Argument(0))
			_, ok := c.memGet(ns, key)
			return c.vm.ToValue(ok)
		}
	case "Set":
		return func(fc goja.FunctionCall) goja.Value {
			key := c.memKey(ns, "Set", fc.Argument(0))
			v := fc.Argument(1)
			if !isNullish(fc.Argument(2)) {
				// Yao's ttl: values here live until deleted.
				c.hostLog(slog.LevelWarn, "memory Set: the ttl argument is not kept; the value stays until deleted", "namespace", string(ns), "key", key)
			}
			s, ok, err := c.stringify(v)
			switch {
			case err != nil:
				c.throw(argErr("memory.%s.Set(%q): value is not JSON-serialisable: %v", ns, key, err), "")
			case !ok:
				c.throw(argErr("memory.%s.Set(%q): %s cannot be stored (values must be JSON-serialisable; use Del to remove a key)", ns, key, typeName(v)), "")
			case len(s) > MaxValueSize:
				c.throw(&hostError{code: CodeMemory, msg: fmt.Sprintf("memory.%s.Set(%q): value is %d bytes as JSON, over the limit of %d", ns, key, len(s), MaxValueSize)}, "")
			}
			if ns == NamespaceContext {
				c.hc.scratchSet(key, json.RawMessage(s))
				return goja.Undefined()
			}
			store, owner := c.memStore(ns, "Set")
			if err := store.Set(c.ctx, ns, owner, key, json.RawMessage(s)); err != nil {
				c.throw(fmt.Errorf("memory.%s.Set(%q): %w", ns, key, err), CodeMemory)
			}
			return goja.Undefined()
		}
	case "Del":
		return func(fc goja.FunctionCall) goja.Value {
			key := c.memKey(ns, "Del", fc.Argument(0))
			if ns == NamespaceContext {
				c.hc.scratchDel(key)
				return goja.Undefined()
			}
			store, owner := c.memStore(ns, "Del")
			if err := store.Del(c.ctx, ns, owner, key); err != nil {
				c.throw(fmt.Errorf("memory.%s.Del(%q): %w", ns, key, err), CodeMemory)
			}
			return goja.Undefined()
		}
	case "Len":
		return func(fc goja.FunctionCall) goja.Value {
			if ns == NamespaceContext {
				return c.vm.ToValue(len(c.hc.scratchKeys()))
			}
			store, owner := c.memStore(ns, "Len")
			n, err := store.Len(c.ctx, ns, owner)
			if err != nil {
				c.throw(fmt.Errorf("memory.%s.Len(): %w", ns, err), CodeMemory)
			}
			return c.vm.ToValue(n)
		}
	case "Clear":
		return func(fc goja.FunctionCall) goja.Value {
			if ns == NamespaceContext {
				c.hc.mu.Lock()
				c.hc.scratch = nil
				c.hc.mu.Unlock()
				return goja.Undefined()
			}
			store, owner := c.memStore(ns, "Clear")
			if _, err := store.Clear(c.ctx, ns, owner); err != nil {
				c.throw(fmt.Errorf("memory.%s.Clear(): %w", ns, err), CodeMemory)
			}
			return goja.Undefined()
		}
	case "Incr", "Decr":
		return func(fc goja.FunctionCall) goja.Value {
			key := c.memKey(ns, name, fc.Argument(0))
			delta := int64(1)
			if v := fc.Argument(1); !isNullish(v) {
				f := v.ToFloat()
				if _, isStr := asString(v); isStr || f != math.Trunc(f) || math.IsInf(f, 0) || math.Abs(f) > 1<<53 {
					c.throw(argErr("memory.%s.%s(%q): want an integer step, got %s", ns, name, key, v.String()), "")
				}
				delta = int64(f)
			}
			if name == "Decr" {
				delta = -delta
			}
			var n int64
			var err error
			if ns == NamespaceContext {
				n, err = c.hc.scratchIncr(key, delta)
			} else {
				store, owner := c.memStore(ns, name)
				n, err = store.Incr(c.ctx, ns, owner, key, delta)
			}
			if err != nil {
				c.throw(fmt.Errorf("memory.%s.%s(%q): %w", ns, name, key, err), CodeMemory)
			}
			return c.vm.ToValue(n)
		}
	case "GetDel":
		return func(fc goja.FunctionCall) goja.Value {
			key := c.memKey(ns, "GetDel", fc.Argument(0))
			var raw json.RawMessage
			var ok bool
			if ns == NamespaceContext {
				raw, ok = c.hc.scratchGetDel(key)
			} else {
				store, owner := c.memStore(ns, "GetDel")
				var err error
				if raw, ok, err = store.GetDel(c.ctx, ns, owner, key); err != nil {
					c.throw(fmt.Errorf("memory.%s.GetDel(%q): %w", ns, key, err), CodeMemory)
				}
			}
			if !ok {
				return goja.Undefined()
			}
			if !json.Valid(raw) {
				c.throw(&hostError{code: CodeMemory, msg: fmt.Sprintf("memory.%s.GetDel(%q): the stored value is not valid JSON", ns, key)}, "")
			}
			return c.parseJSON(raw)
		}
	case "Keys":
		return func(fc goja.FunctionCall) goja.Value {
			var keys []string
			if ns == NamespaceContext {
				keys = c.hc.scratchKeys()
			} else {
				store, owner := c.memStore(ns, "Keys")
				var err error
				if keys, err = store.Keys(c.ctx, ns, owner); err != nil {
					c.throw(fmt.Errorf("memory.%s.Keys(): %w", ns, err), CodeMemory)
				}
			}
			return c.toJS(keys)
		}
	}
	return nil
}

func (c *call) memKey(ns Namespace, fn string, v goja.Value) string {
	key, ok := asString(v)
	switch {
	case !ok:
		c.throw(argErr("memory.%s.%s: want a string key, got %s", ns, fn, typeName(v)), "")
	case key == "":
		c.throw(argErr("memory.%s.%s: the key is empty", ns, fn), "")
	case len(key) > MaxKeyLen:
		c.throw(argErr("memory.%s.%s: the key is %d bytes, over the limit of %d", ns, fn, len(key), MaxKeyLen), "")
	}
	return key
}

// memStore returns the store and owner for a persistent namespace, or
// throws when there is none.
func (c *call) memStore(ns Namespace, fn string) (MemoryStore, string) {
	hc := c.hc
	if hc.Memory == nil {
		c.throw(&hostError{code: CodeMemory, msg: fmt.Sprintf("memory.%s.%s: no memory store is configured", ns, fn)}, "")
	}
	if hc.UserID == "" {
		c.throw(&hostError{code: CodeMemory, msg: fmt.Sprintf("memory.%s.%s: the request has no user", ns, fn)}, "")
	}
	if ns == NamespaceTeam {
		if hc.TeamID == "" {
			c.throw(&hostError{code: CodeMemory, msg: fmt.Sprintf("memory.team.%s: the request has no team: user %q's credentials name none (give the bearer token a team in app.jsonc's auth.tokens)", fn, hc.UserID)}, "")
		}
		return hc.Memory, hc.TeamID
	}
	if ns == NamespaceChat {
		if hc.ChatID == "" {
			c.throw(&hostError{code: CodeMemory, msg: fmt.Sprintf("memory.chat.%s: the request has no chat", fn)}, "")
		}
		return hc.Memory, ChatOwner(hc.UserID, hc.ChatID)
	}
	return hc.Memory, hc.UserID
}

func (c *call) memGet(ns Namespace, key string) (json.RawMessage, bool) {
	if ns == NamespaceContext {
		return c.hc.scratchGet(key)
	}
	store, owner := c.memStore(ns, "Get")
	raw, ok, err := store.Get(c.ctx, ns, owner, key)
	if err != nil {
		c.throw(fmt.Errorf("memory.%s.Get(%q): %w", ns, key, err), CodeMemory)
	}
	if ok && !json.Valid(raw) {
		c.throw(&hostError{code: CodeMemory, msg: fmt.Sprintf("memory.%s.Get(%q): the stored value is not valid JSON", ns, key)}, "")
	}
	return raw, ok
}
