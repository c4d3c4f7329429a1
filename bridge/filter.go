package bridge

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os/exec"
	"runtime"
	"slices"
	"sync"
	"time"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/modelcontextprotocol/go-sdk/mcp"
	"github.com/tidwall/gjson"
)

// FilterConfig configures GuestFilter.
type FilterConfig struct {
	// Allow are the tools of the server the agent may see and call, by the
	// names the server gives them (package.yao's tools of the server
	// reference).
	Allow []string
	// Argv starts the stdio server, with Env as its environment (nil: this
	// process's, where the CLI put the server's).
	Argv []string
	Env  []string
	// Stdin and Stdout are the CLI's side; Stderr gets the server's stderr
	// and the relay's own diagnostics.
	Stdin          io.Reader
	Stdout, Stderr io.Writer
}

// GuestFilter is `agentbox bridge mcp-filter`: a stdio MCP server for the
// agent CLI standing in front of one stdio MCP server, which it starts.
// Every message passes through, except that the server's tool list is cut
// to Allow and a call of another tool is refused with a JSON-RPC error
// (-32602, what MCP servers answer for an unknown tool) without reaching
// the server: a tool the assistant did not list is neither offered to the
// model nor callable, whatever the CLI's permission mode. A line from the
// CLI that is not a message gets a JSON-RPC error. It returns when the
// CLI's input ends or the server goes away. (A remote server's tool list
// is enforced by the host relay that reaches it, remote.go.)
func GuestFilter(ctx context.Context, cfg FilterConfig) error {
	if len(cfg.Argv) == 0 {
		return errors.New("no server command: give it after --")
	}
	// The server gets Pdeathsig when the thread that starts it ends
	// (startLocked): this goroutine keeps that thread until the server
	// is closed.
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	cmd := exec.Command(cfg.Argv[0], cfg.Argv[1:]...)
	cmd.Env = cfg.Env
	cmd.Stderr = cfg.Stderr
	setPdeathsig(cmd)
	server, err := (&mcp.CommandTransport{Command: cmd}).Connect(ctx)
	if err != nil {
		return fmt.Errorf("start mcp server %s: %w", cfg.Argv[0], err)
	}
	return relayMCP(ctx, server, cfg.Stdin, &lineWriter{w: cfg.Stdout}, cfg.Allow)
}

// relayMCP passes JSON-RPC messages between the CLI (lines on in and out)
// and server, with the server's tool list cut to allow and calls of other
// tools refused (allow empty: every tool). It closes server, and returns
// when the CLI's input ends or the server goes away.
func relayMCP(ctx context.Context, server mcp.Connection, in io.Reader, out *lineWriter, allow []string) error {
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	defer server.Close()
	f := &filter{allow: allow, out: out, server: server, lists: map[string]bool{}}
	done := make(chan error, 1)
	go func() {
		err := readMessages(in, f.out, f.fromCLI)
		// The CLI is done: the server ends with the connection.
		server.Close()
		done <- err
	}()
	var serverErr error
	for {
		msg, err := server.Read(ctx)
		if err != nil {
			if !errors.Is(err, io.EOF) && !errors.Is(err, mcp.ErrConnectionClosed) && ctx.Err() == nil {
				serverErr = fmt.Errorf("mcp server: %w", err)
			}
			break
		}
		if err := f.fromServer(msg); err != nil {
			serverErr = err
			break
		}
	}
	server.Close()
	select {
	case err := <-done:
		return errors.Join(serverErr, err)
	case <-time.After(time.Second):
		// The CLI's side is still open: the server is gone, so is the
		// relay.
		return serverErr
	}
}

// headerTransport adds the server's headers to every request.
type headerTransport struct {
	h  http.Header
	rt http.RoundTripper
}

func (t headerTransport) RoundTrip(r *http.Request) (*http.Response, error) {
	if len(t.h) > 0 {
		r = r.Clone(r.Context())
		for k, vs := range t.h {
			r.Header[k] = vs
		}
	}
	return t.rt.RoundTrip(r)
}

// filter is one relay's state.
type filter struct {
	allow  []string // empty: every tool
	out    *lineWriter
	server mcp.Connection

	mu    sync.Mutex
	lists map[string]bool // ids of the CLI's tools/list calls in flight
}

func idKey(id jsonrpc.ID) string { return fmt.Sprintf("%T:%v", id.Raw(), id.Raw()) }

// fromCLI passes a message of the CLI on, unless it calls a tool not
// allowed.
func (f *filter) fromCLI(raw []byte, msg jsonrpc.Message) error {
	if msg == nil {
		// A batch (not used by MCP since 2025-06-18): its calls cannot be
		// checked one by one, so none passes.
		return f.out.rpcError(nil, jsonrpc.CodeInvalidRequest, "Invalid Request: batches are not supported")
	}
	if req, ok := msg.(*jsonrpc.Request); ok && req.IsCall() {
		switch req.Method {
		case "tools/call":
			name := gjson.GetBytes(req.Params, "name").String()
			if len(f.allow) > 0 && !slices.Contains(f.allow, name) {
				return f.out.message(&jsonrpc.Response{ID: req.ID, Error: &jsonrpc.Error{
					Code: jsonrpc.CodeInvalidParams, Message: fmt.Sprintf("Unknown tool: %s", name)}})
			}
		case "tools/list":
			f.mu.Lock()
			f.lists[idKey(req.ID)] = true
			f.mu.Unlock()
		}
	}
	if err := f.server.Write(context.Background(), msg); err != nil {
		return fmt.Errorf("relay to mcp server: %w", err)
	}
	return nil
}

// fromServer passes a message of the server on, its tool lists cut to the
// allowed tools.
func (f *filter) fromServer(msg jsonrpc.Message) error {
	if resp, ok := msg.(*jsonrpc.Response); ok && resp.Error == nil {
		f.mu.Lock()
		list := f.lists[idKey(resp.ID)]
		delete(f.lists, idKey(resp.ID))
		f.mu.Unlock()
		if list && len(f.allow) > 0 {
			result, err := f.allowedTools(resp.Result)
			if err != nil {
				return err
			}
			resp.Result = result
		}
	}
	return f.out.message(msg)
}

// allowedTools returns a tools/list result with only the allowed tools.
func (f *filter) allowedTools(result json.RawMessage) (json.RawMessage, error) {
	var r map[string]json.RawMessage
	if err := json.Unmarshal(result, &r); err != nil {
		return nil, fmt.Errorf("mcp server's tool list: %w", err)
	}
	var tools []json.RawMessage
	if err := json.Unmarshal(r["tools"], &tools); err != nil {
		return nil, fmt.Errorf("mcp server's tool list: %w", err)
	}
	kept := make([]json.RawMessage, 0, len(tools))
	for _, t := range tools {
		if slices.Contains(f.allow, gjson.GetBytes(t, "name").String()) {
			kept = append(kept, t)
		}
	}
	b, err := json.Marshal(kept)
	if err != nil {
		return nil, err
	}
	r["tools"] = b
	return json.Marshal(r)
}
