package jsapi

import (
	"encoding/json"
	"log/slog"
	"maps"
	"slices"
	"strconv"
	"sync"

	"github.com/agentbox/agentbox/chat"
	"github.com/agentbox/agentbox/sandbox"
)

// Context is what one request gives its hooks: the pipeline fills the
// exported fields and passes the same Context to Create, Next and any Call
// of that request, so the context memory namespace and the messages a hook
// streams carry over between them. A Context is safe for concurrent use, but
// belongs to one request.
type Context struct {
	ChatID      string
	AssistantID string
	// UserID is the authenticated user.
	UserID string
	// TeamID is the user's team, when the authentication names one: it
	// owns the team memory namespace ("": ctx.memory.team throws).
	TeamID   string
	Locale   string
	Metadata map[string]any
	// Client is where the request came from, as Yao's hooks see it
	// (ctx.client, ctx.referer, ctx.accept, ctx.theme, ctx.route).
	Client Client
	// Sandbox is the request's live sandbox; nil for a direct assistant,
	// where ctx.sandbox is undefined.
	Sandbox sandbox.Sandbox
	// Computer describes Sandbox for ctx.computer.Info.
	Computer ComputerInfo
	// Emit receives the messages hooks send (nil drops them).
	Emit chat.EmitFunc
	// Agents runs other assistants for ctx.agent (nil: its calls fail).
	Agents Agents
	// LLM calls the app's connectors for ctx.llm (nil: its calls fail).
	LLM LLM
	// MCP reaches the assistant's MCP servers for ctx.mcp (nil: its calls
	// throw MCP_ERROR).
	MCP MCPServers
	// Memory backs the user and chat namespaces (nil: they throw
	// MEMORY_ERROR).
	Memory MemoryStore
	// Logger receives log.* and console.* output; it should carry the
	// request's ids (nil: slog.Default with the ids added).
	Logger *slog.Logger

	mu       sync.Mutex
	scratch  map[string]json.RawMessage // the context namespace
	seq      int
	msgs     map[string]*hookMsg // messages sent by hooks, by id
	open     []string            // streamed messages not yet ended, in order
	system   map[string]any      // ctx.computer.Info's system, once asked
	agentSeq int                 // ctx.agent calls made, for their ids
	llmSeq   int                 // ctx.llm calls made, for their ids
}

// Client is where a request came from, in Yao's terms: its client (Type
// from the User-Agent, as Yao classifies it: web, agent, jssdk, android,
// ios, windows, macos, linux), what made the request (Referer: api,
// process, mcp, jssdk, agent, agent_fork, tool, hook, schedule, script,
// internal), the output it accepts (Accept: standard, cui-web,
// cui-native, cui-desktop), the client's theme and the route it shows.
type Client struct {
	Type      string
	UserAgent string
	IP        string
	Referer   string
	Accept    string
	Theme     string
	Route     string
}

// The referers of turns an assistant's hook starts (Yao's).
const (
	// RefererAgentFork: a ctx.agent call's turn.
	RefererAgentFork = "agent_fork"
	// RefererAgent: the turn a Create or Next delegated to.
	RefererAgent = "agent"
)

// hookMsg is a message a hook sent.
type hookMsg struct {
	typ  string
	open bool
}

// nextID returns a message id unique within the request.
func (c *Context) nextID() string { return c.newID("hook_") }

// newID returns an id with prefix unique within the request (c.mu held).
func (c *Context) newID(prefix string) string {
	c.seq++
	return prefix + strconv.Itoa(c.seq)
}

// emit sends e to the client, if anyone listens.
func (c *Context) emit(e chat.Event) {
	if c.Emit != nil {
		c.Emit(e)
	}
}

// EndOpen ends every message a hook streamed with SendStream and did not
// End, in the order they were started. The hooks call it themselves after
// Next and after a Create that threw; a pipeline that skips Next calls it
// before done so clients never see a dangling stream. It is idempotent.
func (c *Context) EndOpen() {
	c.mu.Lock()
	open := c.open
	c.open = nil
	var ends []chat.Event
	for _, id := range open {
		m := c.msgs[id]
		if m == nil || !m.open {
			continue
		}
		m.open = false
		ends = append(ends, chat.Event{Event: chat.End, ID: id, Type: m.typ})
	}
	c.mu.Unlock()
	for _, e := range ends {
		c.emit(e)
	}
}

// Scratch returns a copy of the context memory namespace (what hooks stored
// with ctx.memory.context), for the pipeline and tests.
func (c *Context) Scratch() map[string]json.RawMessage {
	c.mu.Lock()
	defer c.mu.Unlock()
	out := make(map[string]json.RawMessage, len(c.scratch))
	for k, v := range c.scratch {
		out[k] = slices.Clone(v)
	}
	return out
}

func (c *Context) scratchGet(key string) (json.RawMessage, bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	v, ok := c.scratch[key]
	return v, ok
}

func (c *Context) scratchSet(key string, v json.RawMessage) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.scratch == nil {
		c.scratch = map[string]json.RawMessage{}
	}
	c.scratch[key] = v
}

func (c *Context) scratchDel(key string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	delete(c.scratch, key)
}

func (c *Context) scratchKeys() []string {
	c.mu.Lock()
	defer c.mu.Unlock()
	return slices.Sorted(maps.Keys(c.scratch))
}

func (c *Context) scratchGetDel(key string) (json.RawMessage, bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	v, ok := c.scratch[key]
	delete(c.scratch, key)
	return v, ok
}

func (c *Context) scratchIncr(key string, delta int64) (int64, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	var n int64
	if v, ok := c.scratch[key]; ok {
		var err error
		if n, err = intValue(v); err != nil {
			return 0, err
		}
	}
	n += delta
	if c.scratch == nil {
		c.scratch = map[string]json.RawMessage{}
	}
	c.scratch[key] = json.RawMessage(strconv.FormatInt(n, 10))
	return n, nil
}
