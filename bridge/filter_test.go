package bridge

import (
	"bufio"
	"context"
	"encoding/json"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
	"github.com/tidwall/gjson"

	"github.com/agentbox/agentbox/bridge/bridgetest"
)

// startFilter runs GuestFilter with cfg between pipes and returns the
// CLI's ends: what it writes to the filter and what it reads from it.
func startFilter(t *testing.T, cfg FilterConfig) (io.WriteCloser, io.Reader) {
	t.Helper()
	inR, inW := io.Pipe()
	outR, outW := io.Pipe()
	cfg.Stdin, cfg.Stdout, cfg.Stderr = inR, outW, io.Discard
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() {
		err := GuestFilter(ctx, cfg)
		outW.Close()
		done <- err
	}()
	t.Cleanup(func() {
		inW.Close()
		select {
		case <-done:
		case <-time.After(10 * time.Second):
			t.Error("the filter did not end after its input")
		}
		cancel()
	})
	return inW, outR
}

// TestFilter: the filter lists only the allowed tools of a stdio server
// and refuses a call of another one before it reaches the server.
func TestFilter(t *testing.T) {
	t.Parallel()
	callLog := filepath.Join(t.TempDir(), "calls")
	argv, env := bridgetest.StdioCommand(t)
	in, out := startFilter(t, FilterConfig{Allow: []string{"visible", "also_visible"}, Argv: argv, Env: append(env, bridgetest.CallLogEnv+"="+callLog)})
	checkToolList(t, io.NopCloser(out), in, func() []string {
		b, _ := os.ReadFile(callLog)
		return strings.Fields(string(b))
	})
}

// checkToolList connects an MCP client over r and w to a relay that
// allows visible and also_visible: only those are listed, hidden is
// refused without reaching the server, visible runs (ran says what did).
func checkToolList(t *testing.T, r io.ReadCloser, w io.WriteCloser, ran func() []string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	client := mcp.NewClient(&mcp.Implementation{Name: "cli", Version: "1"}, nil)
	sess, err := client.Connect(ctx, &mcp.IOTransport{Reader: r, Writer: w}, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer sess.Close()
	list, err := sess.ListTools(ctx, nil)
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, tool := range list.Tools {
		names = append(names, tool.Name)
	}
	slices.Sort(names)
	if !slices.Equal(names, []string{"also_visible", "visible"}) {
		t.Errorf("tools %v", names)
	}
	if _, err := sess.CallTool(ctx, &mcp.CallToolParams{Name: "hidden"}); err == nil || !strings.Contains(err.Error(), "Unknown tool: hidden") {
		t.Errorf("calling the hidden tool: %v", err)
	}
	res, err := sess.CallTool(ctx, &mcp.CallToolParams{Name: "visible"})
	if err != nil || res.IsError || res.Content[0].(*mcp.TextContent).Text != "visible called" {
		t.Fatalf("calling a visible tool: %+v, %v", res, err)
	}
	if got := ran(); !slices.Equal(got, []string{"visible"}) {
		t.Errorf("the server ran %v", got)
	}
}

// TestRelaysAnswerMalformedLines: a line from the CLI that is not a
// JSON-RPC message gets an error, and the relay carries on.
func TestRelaysAnswerMalformedLines(t *testing.T) {
	t.Parallel()
	check := func(t *testing.T, in io.Writer, out io.Reader) {
		t.Helper()
		r := bufio.NewReader(out)
		for _, tc := range []struct{ line, code, id string }{
			{"this is not json", "-32700", "null"},
			{`{"jsonrpc":"2.0","id":7,"method":`, "-32700", "null"},
			{`{"id":8,"hello":"world"}`, "-32600", "8"},
			{`[1,2`, "-32700", "null"},
		} {
			if _, err := io.WriteString(in, tc.line+"\n"); err != nil {
				t.Fatal(err)
			}
			got, err := r.ReadString('\n')
			if err != nil {
				t.Fatal(err)
			}
			if c, id := gjson.Get(got, "error.code").Raw, gjson.Get(got, "id").Raw; c != tc.code || id != tc.id {
				t.Errorf("%q: answered %s", tc.line, got)
			}
		}
		// Still alive: a real request is answered.
		io.WriteString(in, `{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-06-18","capabilities":{},"clientInfo":{"name":"x","version":"1"}}}`+"\n")
		got, err := r.ReadString('\n')
		if err != nil || gjson.Get(got, "id").Int() != 1 || !gjson.Get(got, "result.serverInfo").Exists() {
			t.Errorf("initialize after malformed lines: %s, %v", got, err)
		}
	}
	t.Run("filter", func(t *testing.T) {
		t.Parallel()
		argv, env := bridgetest.StdioCommand(t)
		in, out := startFilter(t, FilterConfig{Allow: []string{"visible"}, Argv: argv, Env: env})
		check(t, in, out)
	})
	t.Run("host tools", func(t *testing.T) {
		t.Parallel()
		s := startSession(t, Options{Tools: []Tool{{Name: "echo", Handler: func(_ context.Context, args json.RawMessage) (any, error) { return args, nil }}}})
		inR, inW := io.Pipe()
		outR, outW := io.Pipe()
		done := make(chan error, 1)
		go func() {
			done <- GuestMCP(context.Background(), filepath.Join(s.Dir(), "tools.sock"), "", inR, outW)
			outW.Close()
		}()
		check(t, inW, outR)
		inW.Close()
		if err := <-done; err != nil {
			t.Errorf("relay: %v", err)
		}
	})
}
