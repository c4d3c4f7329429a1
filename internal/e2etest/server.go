// Package e2etest holds what the end-to-end suites under test/ share: a
// real `agentbox serve` started and stopped for a test (Serve), native
// chat turns against it (Server.Chat), the sandbox containers a chat left
// on the Docker engine (ChatContainers), and small helpers for test apps
// and waits. It is test code: no product package imports it
// (scripts/check-testdeps.sh).
package e2etest

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/agentbox/agentbox/chat"
	"github.com/agentbox/agentbox/internal/testenv"
)

// Options says how Serve runs `agentbox serve`.
type Options struct {
	// Bin is the agentbox binary (default: testenv.Agentbox, the product
	// as `make build` builds it).
	Bin string
	// Env is added to the test's environment.
	Env []string
	// Args follow `serve --app APP --addr ADDR`.
	Args []string
	// Name names the server in its log when the test failed (for tests
	// that run several).
	Name string
	// StopWait bounds how long the cleanup waits for the server to exit
	// after SIGTERM before it kills it and fails the test (default 60s).
	StopWait time.Duration
}

// Server is a running `agentbox serve` (Serve).
type Server struct {
	// URL is the server's base URL, on loopback.
	URL string
	// Cmd is the server's process.
	Cmd *exec.Cmd
	// Logs is what the server wrote to stdout and stderr.
	Logs *testenv.SyncBuffer

	t    testing.TB
	done chan struct{}
}

// Serve starts `agentbox serve` on app at a free loopback address and
// waits until its /health answers; the test fails when the server exits
// or does not answer within 30s. When the test ends the server is stopped
// with SIGTERM (Stop) and its log shown if the test failed.
func Serve(t testing.TB, app string, opts Options) *Server {
	t.Helper()
	if opts.Bin == "" {
		opts.Bin = testenv.Agentbox(t)
	}
	if opts.StopWait == 0 {
		opts.StopWait = 60 * time.Second
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	ln.Close()
	s := &Server{URL: "http://" + addr, Logs: &testenv.SyncBuffer{}, t: t, done: make(chan struct{})}
	s.Cmd = exec.Command(opts.Bin, append([]string{"serve", "--app", app, "--addr", addr}, opts.Args...)...)
	s.Cmd.Env = append(os.Environ(), opts.Env...)
	s.Cmd.Stdout, s.Cmd.Stderr = s.Logs, s.Logs
	if err := s.Cmd.Start(); err != nil {
		t.Fatal(err)
	}
	go func() { _ = s.Cmd.Wait(); close(s.done) }()
	t.Cleanup(func() {
		s.Stop(syscall.SIGTERM, opts.StopWait)
		if t.Failed() {
			t.Logf("%s log:\n%s", strings.TrimSpace("server "+opts.Name), s.Logs.String())
		}
	})
	deadline := time.Now().Add(30 * time.Second)
	for {
		resp, err := http.Get(s.URL + "/health")
		if err == nil {
			resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				return s
			}
		}
		select {
		case <-s.done:
			t.Fatalf("the server exited:\n%s", s.Logs.String())
		default:
		}
		if time.Now().After(deadline) {
			t.Fatalf("the server did not come up: %v\n%s", err, s.Logs.String())
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// Done is closed once the server's process has exited.
func (s *Server) Done() <-chan struct{} { return s.done }

// Exited reports whether the server's process has exited, and its exit
// code.
func (s *Server) Exited() (bool, int) {
	select {
	case <-s.done:
		return true, s.Cmd.ProcessState.ExitCode()
	default:
		return false, 0
	}
}

// Stop signals the server and waits for it to exit, up to wait (then it
// is killed and the test fails); it returns how long the exit took (0:
// it had exited already).
func (s *Server) Stop(sig syscall.Signal, wait time.Duration) time.Duration {
	t0 := time.Now()
	select {
	case <-s.done:
		return 0
	default:
	}
	_ = s.Cmd.Process.Signal(sig)
	select {
	case <-s.done:
		return time.Since(t0)
	case <-time.After(wait):
		_ = s.Cmd.Process.Kill()
		<-s.done
		s.t.Errorf("the server did not exit within %s of %s", wait, sig)
		return time.Since(t0)
	}
}

// Reply is the outcome of one native chat turn (Server.Chat).
type Reply struct {
	Status int
	Header http.Header
	// Body is the error body of an answer other than 200.
	Body string
	// Events are the native stream's events.
	Events []chat.Event
	// Err is the transport's error, or the stream's.
	Err error
}

// Final is the done event's Final, or nil.
func (r Reply) Final() *chat.Final {
	for _, e := range r.Events {
		if e.Event == chat.Done {
			return e.Final
		}
	}
	return nil
}

// Chat sends one turn to the native API as the user of token (none when
// "") and reads its stream to the end.
func (s *Server) Chat(ctx context.Context, token, assistant, chatID, message string) Reply {
	body, _ := json.Marshal(map[string]any{"chat_id": chatID, "message": message})
	req, _ := http.NewRequestWithContext(ctx, http.MethodPost, s.URL+"/api/assistants/"+assistant+"/chat", bytes.NewReader(body))
	req.Header.Set("Content-Type", "application/json")
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return Reply{Err: err}
	}
	defer resp.Body.Close()
	r := Reply{Status: resp.StatusCode, Header: resp.Header}
	if resp.StatusCode != http.StatusOK {
		b, _ := io.ReadAll(resp.Body)
		r.Body = string(b)
		return r
	}
	r.Events, r.Err = testenv.ReadEvents(resp.Body)
	return r
}

// Send sends method path with token (none when "") and body, of
// contentType (none when ""), and returns the status and the body of the
// answer.
func (s *Server) Send(t testing.TB, method, path, token, contentType string, body io.Reader) (int, string) {
	t.Helper()
	req, _ := http.NewRequest(method, s.URL+path, body)
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	if contentType != "" {
		req.Header.Set("Content-Type", contentType)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b)
}
