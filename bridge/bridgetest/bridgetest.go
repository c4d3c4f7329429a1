// Package bridgetest holds test helpers for the bridge's MCP relays: an
// MCP server with tools to show and tools to hide, served over stdio (by a
// test binary that re-executes itself), streamable HTTP or SSE, and a
// record of the calls it ran, so a test can tell a hidden tool was never
// reached.
package bridgetest

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"strings"
	"sync"
	"testing"

	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// Tools are the server's tools: each answers "NAME called" (and appends a
// line to the file named by CallLogEnv, when set); "headers" answers with
// the Authorization header of the streamable HTTP request that called it,
// as a careless server might.
var Tools = []string{"visible", "also_visible", "hidden", "headers"}

// StdioEnv, set to "1", makes a test binary that calls ServeStdioIfAsked
// in its TestMain serve the MCP server on stdio instead of running tests.
const StdioEnv = "BRIDGETEST_MCP_STDIO"

// CallLogEnv names a file every call of the stdio server is appended to.
const CallLogEnv = "BRIDGETEST_MCP_CALL_LOG"

// Calls records the tools a server ran. It is safe for concurrent use.
type Calls struct {
	mu    sync.Mutex
	names []string
}

// Names returns the tools called so far, in order.
func (c *Calls) Names() []string {
	c.mu.Lock()
	defer c.mu.Unlock()
	return append([]string(nil), c.names...)
}

func (c *Calls) add(name string) {
	c.mu.Lock()
	c.names = append(c.names, name)
	c.mu.Unlock()
}

// NewServer returns the MCP server; calls records what it ran.
func NewServer(calls *Calls) *mcp.Server {
	s := mcp.NewServer(&mcp.Implementation{Name: "bridgetest", Version: "1"}, nil)
	for _, name := range Tools {
		s.AddTool(&mcp.Tool{Name: name, Description: "The " + name + " tool.", InputSchema: json.RawMessage(`{"type":"object"}`)},
			func(ctx context.Context, req *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
				calls.add(name)
				if f := os.Getenv(CallLogEnv); f != "" {
					if fh, err := os.OpenFile(f, os.O_APPEND|os.O_CREATE|os.O_WRONLY, 0o600); err == nil {
						fmt.Fprintln(fh, name)
						fh.Close()
					}
				}
				text := name + " called"
				if name == "headers" && req.Extra != nil && req.Extra.Header != nil {
					text = "Authorization: " + req.Extra.Header.Get("Authorization")
				}
				return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: text}}}, nil
			})
	}
	return s
}

// ServeStdioIfAsked serves the MCP server on stdio and exits when StdioEnv
// is set (call it first in TestMain); otherwise it returns.
func ServeStdioIfAsked() {
	if os.Getenv(StdioEnv) != "1" {
		return
	}
	err := NewServer(&Calls{}).Run(context.Background(), &mcp.StdioTransport{})
	if err != nil && !strings.Contains(err.Error(), "EOF") {
		fmt.Fprintln(os.Stderr, "bridgetest server:", err)
		os.Exit(1)
	}
	os.Exit(0)
}

// StdioCommand is the argv and environment that start the stdio server:
// the running test binary with StdioEnv set.
func StdioCommand(t testing.TB) (argv []string, env []string) {
	t.Helper()
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	return []string{exe}, []string{StdioEnv + "=1"}
}

// HTTPServer serves the MCP server over streamable HTTP (transport
// "http") or SSE ("sse") on loopback and returns its URL. With header
// (NAME=VALUE) set, requests without it get 401.
func HTTPServer(t testing.TB, transport, header string, calls *Calls) string {
	t.Helper()
	srv := NewServer(calls)
	var h http.Handler
	switch transport {
	case "http":
		h = mcp.NewStreamableHTTPHandler(func(*http.Request) *mcp.Server { return srv }, nil)
	case "sse":
		h = mcp.NewSSEHandler(func(*http.Request) *mcp.Server { return srv }, nil)
	default:
		t.Fatalf("transport %q", transport)
	}
	name, value, _ := strings.Cut(header, "=")
	ts := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if name != "" && r.Header.Get(name) != value {
			http.Error(w, "missing "+name, http.StatusUnauthorized)
			return
		}
		h.ServeHTTP(w, r)
	}))
	t.Cleanup(ts.Close)
	return ts.URL
}
