package bridge

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
	"go.uber.org/goleak"

	"github.com/agentbox/agentbox/bridge/bridgetest"
)

// TestMain lets the test binary play the in-sandbox `agentbox bridge mcp`
// (AGENTBOX_BRIDGE_GUEST=mcp), so tests and benchmarks run the real relay
// in its own process without building the whole command, and the MCP
// server the filter tests put behind the filter (bridgetest.StdioEnv).
func TestMain(m *testing.M) {
	bridgetest.ServeStdioIfAsked()
	if os.Getenv("AGENTBOX_BRIDGE_GUEST") == "mcp" {
		if err := GuestMCP(context.Background(), os.Getenv("AGENTBOX_BRIDGE_SOCKET"), "", os.Stdin, os.Stdout); err != nil {
			fmt.Fprintln(os.Stderr, err)
			os.Exit(1)
		}
		os.Exit(0)
	}
	goleak.VerifyTestMain(m)
}

// startSession starts a session with tools and registers its Close.
func startSession(t testing.TB, opts Options) *Session {
	t.Helper()
	if opts.Dir == "" {
		opts.Dir = shortTempDir(t)
	}
	if opts.Binary == "" {
		opts.Binary = os.Args[0]
	}
	s, err := Start(context.Background(), opts)
	if s != nil {
		t.Cleanup(func() { _ = s.Close(context.Background()) })
	}
	if err != nil {
		t.Fatalf("Start: %v", err)
	}
	return s
}

// shortTempDir is a temp dir short enough for socket paths.
func shortTempDir(t testing.TB) string {
	d, err := os.MkdirTemp("", "abx")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(d) })
	return d
}

// connectDirect is an SDK client connected straight to the tools socket.
func connectDirect(t testing.TB, s *Session) *mcp.ClientSession {
	t.Helper()
	c, err := net.Dial("unix", filepath.Join(s.Dir(), "tools.sock"))
	if err != nil {
		t.Fatal(err)
	}
	client := mcp.NewClient(&mcp.Implementation{Name: "test", Version: "1"}, nil)
	cs, err := client.Connect(context.Background(), &mcp.IOTransport{Reader: c, Writer: c}, nil)
	if err != nil {
		c.Close()
		t.Fatalf("connect: %v", err)
	}
	t.Cleanup(func() { cs.Close() })
	return cs
}

// connectGuest is an SDK client talking to the in-sandbox relay (a child
// process) that relays to the session's tools socket.
func connectGuest(t testing.TB, s *Session) *mcp.ClientSession {
	t.Helper()
	cmd := exec.Command(os.Args[0])
	cmd.Env = append(os.Environ(), "AGENTBOX_BRIDGE_GUEST=mcp", "AGENTBOX_BRIDGE_SOCKET="+filepath.Join(s.Dir(), "tools.sock"))
	client := mcp.NewClient(&mcp.Implementation{Name: "test", Version: "1"}, nil)
	cs, err := client.Connect(context.Background(), &mcp.CommandTransport{Command: cmd}, nil)
	if err != nil {
		t.Fatalf("connect: %v", err)
	}
	t.Cleanup(func() { cs.Close() })
	return cs
}

func text(t testing.TB, r *mcp.CallToolResult) string {
	t.Helper()
	var b strings.Builder
	for _, c := range r.Content {
		tc, ok := c.(*mcp.TextContent)
		if !ok {
			t.Fatalf("content %T, want text", c)
		}
		b.WriteString(tc.Text)
	}
	return b.String()
}

const orderSchema = `{
	"type": "object",
	"properties": {
		"order_id": {"type": "string", "pattern": "^[A-Z]-[0-9]+$"},
		"verbose": {"type": "boolean", "default": false}
	},
	"required": ["order_id"],
	"additionalProperties": false
}`

func testTools(calls *atomic.Int32) []Tool {
	return []Tool{
		{
			Name:        "lookup_order",
			Description: "Look up an order by id.",
			InputSchema: json.RawMessage(orderSchema),
			Handler: func(ctx context.Context, args json.RawMessage) (any, error) {
				calls.Add(1)
				var a struct {
					OrderID string `json:"order_id"`
					Verbose bool   `json:"verbose"`
				}
				if err := json.Unmarshal(args, &a); err != nil {
					return nil, err
				}
				ci, _ := CallFrom(ctx)
				return map[string]any{"order": a.OrderID, "status": "shipped", "verbose": a.Verbose, "user": ci.UserID, "chat": ci.ChatID}, nil
			},
		},
		{
			Name:        "fail",
			Description: "Always fails.",
			Handler: func(ctx context.Context, args json.RawMessage) (any, error) {
				return nil, errors.New("warehouse is closed")
			},
		},
		{
			Name:    "slow",
			Timeout: 100 * time.Millisecond,
			Handler: func(ctx context.Context, args json.RawMessage) (any, error) {
				<-ctx.Done() // honours ctx
				return nil, ctx.Err()
			},
		},
		{
			Name:    "stubborn",
			Timeout: 100 * time.Millisecond,
			Handler: func(ctx context.Context, args json.RawMessage) (any, error) {
				time.Sleep(300 * time.Millisecond) // ignores ctx
				return "late", nil
			},
		},
		{
			Name:        "sleep",
			InputSchema: json.RawMessage(`{"type":"object","properties":{"ms":{"type":"integer","minimum":0,"maximum":5000}},"required":["ms"]}`),
			Handler: func(ctx context.Context, args json.RawMessage) (any, error) {
				var a struct{ MS int }
				_ = json.Unmarshal(args, &a)
				select {
				case <-time.After(time.Duration(a.MS) * time.Millisecond):
					return "slept", nil
				case <-ctx.Done():
					return nil, ctx.Err()
				}
			},
		},
		{
			Name: "panics",
			Handler: func(ctx context.Context, args json.RawMessage) (any, error) {
				panic("boom")
			},
		},
	}
}

func TestToolsOverMCP(t *testing.T) {
	var calls atomic.Int32
	s := startSession(t, Options{Tools: testTools(&calls), UserID: "alice", ChatID: "c1"})
	for _, via := range []string{"direct", "guest"} {
		t.Run(via, func(t *testing.T) {
			var cs *mcp.ClientSession
			if via == "direct" {
				cs = connectDirect(t, s)
			} else {
				cs = connectGuest(t, s)
			}
			ctx := context.Background()
			lt, err := cs.ListTools(ctx, nil)
			if err != nil {
				t.Fatal(err)
			}
			var names []string
			for _, tl := range lt.Tools {
				names = append(names, tl.Name)
			}
			slices.Sort(names)
			if want := []string{"fail", "lookup_order", "panics", "sleep", "slow", "stubborn"}; !slices.Equal(names, want) {
				t.Fatalf("tools = %v, want %v", names, want)
			}

			tests := []struct {
				name    string
				tool    string
				args    any
				isError bool
				want    string // substring of the result text
			}{
				{"ok", "lookup_order", map[string]any{"order_id": "A-17"}, false, `"status":"shipped"`},
				{"defaults applied", "lookup_order", map[string]any{"order_id": "A-17"}, false, `"verbose":false`},
				{"request identity", "lookup_order", map[string]any{"order_id": "A-17"}, false, `"user":"alice"`},
				{"missing required", "lookup_order", map[string]any{}, true, "order_id"},
				{"wrong type", "lookup_order", map[string]any{"order_id": 17}, true, "invalid arguments for lookup_order"},
				{"pattern", "lookup_order", map[string]any{"order_id": "x"}, true, "invalid arguments for lookup_order"},
				{"unknown property", "lookup_order", map[string]any{"order_id": "A-1", "x": 1}, true, "invalid arguments"},
				{"integer bound", "sleep", map[string]any{"ms": 999999}, true, "invalid arguments for sleep"},
				{"tool error", "fail", nil, true, "warehouse is closed"},
				{"timeout honoured", "slow", nil, true, "timed out after 100ms"},
				{"timeout ignored", "stubborn", nil, true, "timed out after 100ms"},
				{"panic", "panics", nil, true, "internal error"},
			}
			for _, tc := range tests {
				t.Run(tc.name, func(t *testing.T) {
					res, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: tc.tool, Arguments: tc.args})
					if err != nil {
						t.Fatalf("CallTool: %v", err)
					}
					if got := text(t, res); res.IsError != tc.isError || !strings.Contains(got, tc.want) {
						t.Fatalf("result isError=%v %q, want isError=%v containing %q", res.IsError, got, tc.isError, tc.want)
					}
				})
			}

			// A tool that is not listed does not exist.
			if _, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: "rm_rf", Arguments: map[string]any{}}); err == nil {
				t.Fatal("unlisted tool: want an error")
			}
		})
	}
}

func TestToolsConcurrent(t *testing.T) {
	var calls atomic.Int32
	s := startSession(t, Options{Tools: testTools(&calls)})
	cs := connectGuest(t, s)
	const n = 8
	start := time.Now()
	errs := make(chan error, n)
	for range n {
		go func() {
			res, err := cs.CallTool(context.Background(), &mcp.CallToolParams{Name: "sleep", Arguments: map[string]any{"ms": 300}})
			if err == nil && (res.IsError || text(t, res) != "slept") {
				err = fmt.Errorf("result %+v", res)
			}
			errs <- err
		}()
	}
	for range n {
		if err := <-errs; err != nil {
			t.Fatal(err)
		}
	}
	// Sequential handling would take n*300ms.
	if d := time.Since(start); d > 3*300*time.Millisecond {
		t.Fatalf("%d concurrent 300ms calls took %s: calls are not concurrent", n, d)
	}
}

func TestToolsSessionEnd(t *testing.T) {
	var calls atomic.Int32
	s := startSession(t, Options{Tools: testTools(&calls), Deadline: time.Now().Add(400 * time.Millisecond)})
	cs := connectDirect(t, s)
	// A call running when the deadline passes ends at once.
	res, err := cs.CallTool(context.Background(), &mcp.CallToolParams{Name: "sleep", Arguments: map[string]any{"ms": 5000}})
	if err == nil && !res.IsError {
		t.Fatalf("call across the deadline: got %q, want an error", text(t, res))
	}
	// After Close the socket and directory are gone.
	dir := s.Dir()
	if err := s.Close(context.Background()); err != nil {
		t.Fatalf("Close: %v", err)
	}
	if err := s.Close(context.Background()); err != nil {
		t.Fatalf("second Close: %v", err)
	}
	if _, err := os.Stat(dir); !os.IsNotExist(err) {
		t.Fatalf("session dir after Close: %v", err)
	}
}

// TestToolsTurns: a session kept between turns serves a turn's calls
// while it runs; a call running when the turn ends, or past its deadline,
// ends at once; between turns calls are refused; the next turn is served
// on the same connection.
func TestToolsTurns(t *testing.T) {
	var calls atomic.Int32
	s := startSession(t, Options{Tools: testTools(&calls)})
	cs := connectDirect(t, s)
	call := func(args map[string]any) (string, bool) {
		res, err := cs.CallTool(context.Background(), &mcp.CallToolParams{Name: "sleep", Arguments: args})
		if err != nil {
			t.Fatal(err)
		}
		return text(t, res), res.IsError
	}
	end := s.BeginTurn(context.Background(), time.Time{})
	if got, isErr := call(map[string]any{"ms": 1}); isErr || got != "slept" {
		t.Fatalf("in a turn: %q (error %v)", got, isErr)
	}
	time.AfterFunc(200*time.Millisecond, end)
	if got, isErr := call(map[string]any{"ms": 5000}); !isErr || !strings.Contains(got, "ended") {
		t.Fatalf("across the turn's end: %q (error %v), want it ended", got, isErr)
	}
	if got, isErr := call(map[string]any{"ms": 1}); !isErr {
		t.Fatalf("between turns: %q, want refused", got)
	}
	ctx, cancel := context.WithCancel(context.Background())
	end = s.BeginTurn(ctx, time.Now().Add(300*time.Millisecond))
	defer end()
	if got, isErr := call(map[string]any{"ms": 1}); isErr {
		t.Fatalf("next turn: %q", got)
	}
	if got, isErr := call(map[string]any{"ms": 5000}); !isErr {
		t.Fatalf("past the turn's deadline: %q, want an error", got)
	}
	cancel()
}

func TestSocketPermissions(t *testing.T) {
	var calls atomic.Int32
	s := startSession(t, Options{Tools: testTools(&calls), Upstream: testUpstream("http://127.0.0.1:1")})
	st, err := os.Stat(s.Dir())
	if err != nil {
		t.Fatal(err)
	}
	if st.Mode().Perm() != 0o700 {
		t.Errorf("dir mode %v, want 0700", st.Mode().Perm())
	}
	for _, name := range []string{"tools.sock", "model.sock"} {
		st, err := os.Stat(filepath.Join(s.Dir(), name))
		if err != nil {
			t.Fatal(err)
		}
		if st.Mode()&os.ModeSocket == 0 {
			t.Errorf("%s: not a socket", name)
		}
		if os.Getuid() == 0 && st.Mode().Perm() != 0o600 {
			t.Errorf("%s mode %v, want 0600", name, st.Mode().Perm())
		}
	}
	// Two sessions never share a directory.
	s2 := startSession(t, Options{Tools: testTools(&calls), Dir: filepath.Dir(s.Dir())})
	if s2.Dir() == s.Dir() {
		t.Fatal("two sessions share a directory")
	}
}

func TestCompileToolsErrors(t *testing.T) {
	t.Parallel()
	h := func(context.Context, json.RawMessage) (any, error) { return nil, nil }
	tests := []struct {
		name  string
		tools []Tool
		want  string
	}{
		{"bad name", []Tool{{Name: "a.b", Handler: h}}, "invalid name"},
		{"long name", []Tool{{Name: strings.Repeat("a", 49), Handler: h}}, "invalid name"},
		{"empty name", []Tool{{Handler: h}}, "invalid name"},
		{"duplicate", []Tool{{Name: "a", Handler: h}, {Name: "a", Handler: h}}, "declared twice"},
		{"no handler", []Tool{{Name: "a"}}, "no handler"},
		{"schema not object", []Tool{{Name: "a", Handler: h, InputSchema: json.RawMessage(`{"type":"string"}`)}}, `must have "type": "object"`},
		{"schema syntax", []Tool{{Name: "a", Handler: h, InputSchema: json.RawMessage(`{"type":`)}}, "input schema"},
		{"bad default", []Tool{{Name: "a", Handler: h, InputSchema: json.RawMessage(`{"type":"object","properties":{"n":{"type":"integer","default":"x"}}}`)}}, "input schema"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			_, err := compileTools(tc.tools)
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("err = %v, want containing %q", err, tc.want)
			}
		})
	}
}

func TestSessionWithoutTools(t *testing.T) {
	s := startSession(t, Options{})
	if m := s.MCPServer(); m.Command != "" {
		t.Fatalf("MCPServer without tools = %+v, want zero", m)
	}
	if argv := s.WrapCommand([]string{"claude"}); !slices.Equal(argv, []string{"claude"}) {
		t.Fatalf("WrapCommand without model = %v", argv)
	}
	if len(s.Env()) != 0 || len(s.Mounts()) != 1 {
		t.Fatalf("Env %v Mounts %v", s.Env(), s.Mounts())
	}
}
