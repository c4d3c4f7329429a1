package main

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/agentbox/agentbox/bridge"
	"github.com/agentbox/agentbox/executor"
)

func TestBridgeUsageErrors(t *testing.T) {
	tests := []struct {
		name string
		args []string
		code int
		want string
	}{
		{"no subcommand", nil, 2, "usage: agentbox bridge"},
		{"help", []string{"help"}, 0, "usage: agentbox bridge"},
		{"unknown", []string{"nope"}, 2, `unknown subcommand "nope"`},
		{"bad flag", []string{"mcp", "--nope"}, 2, "flag provided but not defined"},
		{"empty socket", []string{"mcp", "--socket", ""}, 2, "--socket must not be empty"},
		{"mcp extra args", []string{"mcp", "x"}, 2, "unexpected arguments"},
		{"run without command", []string{"run", "--socket", "/nonexistent.sock"}, 2, "no command to run"},
		{"run missing socket", []string{"run", "--socket", "/nonexistent.sock", "--", "true"}, 1, "is the bridge socket mounted?"},
		{"proxy missing socket", []string{"proxy", "--socket", "/nonexistent.sock"}, 1, "model socket"},
		{"filter without a server command", []string{"mcp-filter", "--allow", "a"}, 1, "no server command"},
		{"filter without tools", []string{"mcp-filter", "--", "x"}, 2, "--allow names no tool"},
		{"filter remote flags are gone", []string{"mcp-filter", "--allow", "a", "--url", "http://127.0.0.1:1"}, 2, "flag provided but not defined"},
		{"mcp bad server name", []string{"mcp", "--socket", "/nonexistent.sock", "--server", "a\nb"}, 1, `bad server name "a\nb"`},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			var out, errb bytes.Buffer
			code := dispatch(context.Background(), append([]string{"bridge"}, tc.args...), &out, &errb)
			if code != tc.code || !strings.Contains(out.String()+errb.String(), tc.want) {
				t.Fatalf("exit %d, output %q%q; want %d containing %q", code, out.String(), errb.String(), tc.code, tc.want)
			}
		})
	}
}

// startBridge starts a host session with one tool and a model upstream.
func startBridge(t *testing.T, upstream string) *bridge.Session {
	t.Helper()
	dir, err := os.MkdirTemp("", "abx")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	s, err := bridge.Start(context.Background(), bridge.Options{
		Dir:    dir,
		Binary: os.Args[0],
		Tools: []bridge.Tool{{Name: "echo", Handler: func(ctx context.Context, args json.RawMessage) (any, error) {
			return "echo:" + string(args), nil
		}}},
		Upstream: executor.Connection{Type: "anthropic", Host: upstream, Key: "sk-real"},
	})
	if s != nil {
		t.Cleanup(func() { _ = s.Close(context.Background()) })
	}
	if err != nil {
		t.Fatal(err)
	}
	return s
}

func TestBridgeMCP(t *testing.T) {
	s := startBridge(t, "http://127.0.0.1:1")
	inR, inW := io.Pipe()
	old := bridgeStdin
	bridgeStdin = inR
	t.Cleanup(func() { bridgeStdin = old })
	outR, outW := io.Pipe()
	done := make(chan int, 1)
	go func() {
		done <- dispatch(context.Background(), []string{"bridge", "mcp", "--socket", filepath.Join(s.Dir(), "tools.sock")}, outW, io.Discard)
		outW.Close()
	}()
	dec := bufio.NewReader(outR)
	send := func(msg string) map[string]any {
		t.Helper()
		if _, err := io.WriteString(inW, msg+"\n"); err != nil {
			t.Fatal(err)
		}
		if strings.Contains(msg, `"id"`) {
			line, err := dec.ReadBytes('\n')
			if err != nil {
				t.Fatal(err)
			}
			var m map[string]any
			if err := json.Unmarshal(line, &m); err != nil {
				t.Fatalf("%v: %s", err, line)
			}
			return m
		}
		return nil
	}
	init := send(`{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-06-18","capabilities":{},"clientInfo":{"name":"t","version":"1"}}}`)
	if init["result"] == nil {
		t.Fatalf("initialize: %v", init)
	}
	send(`{"jsonrpc":"2.0","method":"notifications/initialized"}`)
	call := send(`{"jsonrpc":"2.0","id":2,"method":"tools/call","params":{"name":"echo","arguments":{"a":1}}}`)
	b, _ := json.Marshal(call)
	if !strings.Contains(string(b), `echo:{\"a\":1}`) {
		t.Fatalf("tools/call: %s", b)
	}
	inW.Close() // the CLI is done: the relay ends
	select {
	case code := <-done:
		if code != 0 {
			t.Fatalf("exit %d", code)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("bridge mcp did not exit after stdin closed")
	}
}

func TestBridgeRun(t *testing.T) {
	up := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Header.Get("X-Api-Key") != "sk-real" {
			w.WriteHeader(500)
		}
		io.WriteString(w, `{"usage":{"input_tokens":3,"output_tokens":4}}`)
	}))
	t.Cleanup(up.Close)
	s := startBridge(t, up.URL)
	// A tiny client inside "the sandbox": the child gets the proxy's URL
	// and the token, calls the model and exits with a status of its own.
	script := `curl -s -o /dev/null -w '%{http_code}' -H "x-api-key: $TOKEN" -d '{}' "$ANTHROPIC_BASE_URL/v1/messages"; exit 3`
	if _, err := os.Stat("/usr/bin/curl"); err != nil {
		script = `echo 200; exit 3`
	}
	t.Setenv("TOKEN", s.Token())
	var out, errb bytes.Buffer
	code := dispatch(context.Background(), []string{"bridge", "run", "--socket", filepath.Join(s.Dir(), "model.sock"), "--listen", "127.0.0.1:0", "--", "sh", "-c", script}, &out, &errb)
	if code != 3 || out.String() != "200" && !strings.HasPrefix(out.String(), "200") {
		t.Fatalf("exit %d, stdout %q, stderr %q; want 3 and 200", code, out.String(), errb.String())
	}
	if _, err := os.Stat("/usr/bin/curl"); err == nil && s.Usage().OutputTokens != 4 {
		t.Fatalf("usage %+v", s.Usage())
	}
}
