package testenv

import (
	"net"
	"net/http"
	"os"
	"os/exec"
	"syscall"
	"testing"
	"time"
)

// Serve starts `agentbox serve` (Agentbox) on app at a free loopback
// address, with env added to the test's environment, and waits until its
// /health answers. When the test ends it stops the server with SIGTERM,
// failing the test when it does not exit within a minute, and logs its
// output when the test failed. It returns the server's base URL and its
// output.
func Serve(t testing.TB, app string, env []string) (url string, logs *SyncBuffer) {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	ln.Close()
	logs = &SyncBuffer{}
	cmd := exec.Command(Agentbox(t), "serve", "--app", app, "--addr", addr)
	cmd.Env = append(os.Environ(), env...)
	cmd.Stdout, cmd.Stderr = logs, logs
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	done := make(chan struct{})
	go func() { _ = cmd.Wait(); close(done) }()
	t.Cleanup(func() {
		_ = cmd.Process.Signal(syscall.SIGTERM)
		select {
		case <-done:
		case <-time.After(60 * time.Second):
			_ = cmd.Process.Kill()
			<-done
			t.Errorf("the server did not exit within 60s of SIGTERM")
		}
		if t.Failed() {
			t.Logf("server log:\n%s", logs.String())
		}
	})
	url = "http://" + addr
	deadline := time.Now().Add(30 * time.Second)
	for {
		resp, err := http.Get(url + "/health")
		if err == nil {
			resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				return url, logs
			}
		}
		select {
		case <-done:
			t.Fatalf("the server exited:\n%s", logs.String())
		default:
		}
		if time.Now().After(deadline) {
			t.Fatalf("the server did not come up: %v\n%s", err, logs.String())
		}
		time.Sleep(50 * time.Millisecond)
	}
}
