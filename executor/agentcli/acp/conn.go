// Package acp is the client side of the Agent Client Protocol (JSON-RPC
// 2.0, one message a line on the CLI's stdin and stdout), which the
// Gemini CLI (`gemini --acp`) and opencode (`opencode acp`) serve: how
// their executors keep a chat's CLI between turns (agentcli.Keeper). A
// Conn is the conversation with one CLI process (its request ids, its
// session), kept in the process's Plan; a Parser reads one turn of it
// into chat events: it opens the session on the process's first turn
// (initialize, then session/new, or session/load to resume one), sends
// the prompt, turns the session/update notifications into text,
// thinking, tool calls and results, and settles the turn on the prompt's
// response with its usage. The CLI's own requests (a permission to ask,
// the approvals of a later version) go to a Permission hook.
package acp

import (
	"encoding/json"
	"errors"
	"strconv"
	"sync"

	"github.com/agentbox/agentbox/chat"
	"github.com/agentbox/agentbox/executor/agentcli"
)

// ProtocolVersion is the version of the protocol the client speaks.
const ProtocolVersion = 1

// Conn is the client's side of the conversation with one CLI process.
// Its methods are safe for concurrent use; a turn's parser and the
// driver's NextMessage use it one after the other.
type Conn struct {
	cwd    string
	resume string
	prompt string

	mu      sync.Mutex
	ids     int    // the last request id
	session string // the session, once opened
	setup   int    // the id of the initialize or session request pending
	resumes bool   // the CLI resumes a session without replaying it
	// loading: the session was loaded, and the CLI replays its history
	// (after its response, with nothing to mark the end): nothing is
	// shown until a probe (a request the client knows the CLI cannot
	// serve, answered at once) comes back with no update before it.
	loading bool
	probe   int  // the id of the probe pending
	replay  bool // an update arrived since the probe was sent
	probes  int
	pending int  // the id of the session/prompt pending
	opened  bool // the process's first turn has been read
}

// maxProbes bounds the probes of a replay: past it the prompt is sent.
const maxProbes = 1000

// NewConn returns the conversation of a CLI process working in cwd that
// resumes session resume ("": a new session) and takes prompt as its
// first turn's message.
func NewConn(cwd, resume, prompt string) *Conn {
	return &Conn{cwd: cwd, resume: resume, prompt: prompt}
}

// request is a JSON-RPC request.
type request struct {
	JSONRPC string `json:"jsonrpc"`
	ID      int    `json:"id"`
	Method  string `json:"method"`
	Params  any    `json:"params"`
}

// response is a JSON-RPC response to one of the CLI's requests.
type response struct {
	JSONRPC string          `json:"jsonrpc"`
	ID      json.RawMessage `json:"id"`
	Result  any             `json:"result,omitempty"`
	Error   *rpcError       `json:"error,omitempty"`
}

type rpcError struct {
	Code    int    `json:"code"`
	Message string `json:"message"`
}

// Method not found: the answer to a request of the CLI the client does
// not serve.
const codeMethodNotFound = -32601

// newRequest encodes a request with the next id; c.mu is held.
func (c *Conn) newRequest(method string, params any) (int, []byte) {
	c.ids++
	b, err := json.Marshal(request{JSONRPC: "2.0", ID: c.ids, Method: method, Params: params})
	if err != nil {
		// Only the types of this package are marshalled.
		panic(err)
	}
	return c.ids, append(b, '\n')
}

// Start is the process's first message (Plan.Input): the initialize
// request. The client offers neither file system nor terminal access:
// the CLI works on the sandbox's files itself.
func (c *Conn) Start() []byte {
	c.mu.Lock()
	defer c.mu.Unlock()
	id, b := c.newRequest("initialize", map[string]any{
		"protocolVersion": ProtocolVersion,
		"clientCapabilities": map[string]any{
			"fs":       map[string]bool{"readTextFile": false, "writeTextFile": false},
			"terminal": false,
		},
	})
	c.setup = id
	return b
}

// openSession is the request that opens the session once the CLI is
// initialized: session/load of the session to resume, else session/new.
// The MCP servers are the CLI's configuration's.
func (c *Conn) openSession() []byte {
	c.mu.Lock()
	defer c.mu.Unlock()
	params := map[string]any{"cwd": c.cwd, "mcpServers": []any{}}
	method := "session/new"
	switch {
	case c.resume != "" && c.resumes:
		method, params["sessionId"] = "session/resume", c.resume
	case c.resume != "":
		method, params["sessionId"] = "session/load", c.resume
		c.loading = true
	}
	id, b := c.newRequest(method, params)
	c.setup = id
	return b
}

// probeRequest is a request the CLI answers at once with an error (no
// such method), to learn that it has sent what it sent before; c.mu is
// held.
func (c *Conn) probeRequest() []byte {
	c.probes++
	id, b := c.newRequest("agentbox/probe", map[string]any{})
	c.probe, c.replay = id, false
	return b
}

// cancelNotice is the session/cancel notification of the turn pending
// (nil when none is).
func (c *Conn) cancelNotice() []byte {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.pending == 0 || c.session == "" {
		return nil
	}
	b, err := json.Marshal(map[string]any{"jsonrpc": "2.0", "method": "session/cancel", "params": map[string]string{"sessionId": c.session}})
	if err != nil {
		panic(err)
	}
	return append(b, '\n')
}

// promptRequest is the session/prompt request of text; c.mu is held.
func (c *Conn) promptRequest(text string) []byte {
	id, b := c.newRequest("session/prompt", map[string]any{
		"sessionId": c.session,
		"prompt":    []map[string]string{{"type": "text", "text": text}},
	})
	c.pending = id
	return b
}

// Next is the session/prompt request of a later turn's message (the
// Keeper's NextMessage).
func (c *Conn) Next(input []chat.Message) ([]byte, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.session == "" {
		return nil, errors.New("the kept CLI has no session open")
	}
	if c.pending != 0 {
		return nil, errors.New("the kept CLI is still answering prompt " + strconv.Itoa(c.pending))
	}
	var text string
	for _, m := range input {
		if m.Content == "" {
			continue
		}
		if text != "" {
			text += "\n\n"
		}
		text += m.Content
	}
	return c.promptRequest(text), nil
}

// Session is the session the CLI opened ("" before).
func (c *Conn) Session() string {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.session
}

// NextMessage is the agentcli.Keeper's NextMessage of a CLI whose kept
// process's Plan.Protocol is a Conn: the session/prompt request of the
// turn's message.
func NextMessage(next agentcli.Next) ([]byte, error) {
	conn, ok := next.Plan.Protocol.(*Conn)
	if !ok || conn == nil {
		return nil, errors.New("the kept CLI was not started to speak the Agent Client Protocol")
	}
	return conn.Next(next.Input)
}
