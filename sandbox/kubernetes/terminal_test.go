package kubernetes_test

import (
	"context"
	"io"
	"strings"
	"testing"
	"time"

	"github.com/agentbox/agentbox/sandbox"
	"github.com/agentbox/agentbox/sandbox/kubernetes"
	"github.com/agentbox/agentbox/sandbox/kubernetes/k8stest"
)

// TestTerminalPreamble: a terminal's environment reaches its command but
// never its screen (the preamble goes through a file, not the terminal's
// echo), and the file is gone once the command runs.
func TestTerminalPreamble(t *testing.T) {
	t.Parallel()
	const secret = "s3cret-in-the-env"
	rt := k8stest.Runtime(t, kubernetes.Options{Instance: "terminal"})
	sb, err := newSandbox(t, rt, func(s *sandbox.Spec) { s.Env = map[string]string{"SPEC_SECRET": secret} })
	if err != nil {
		t.Fatal(err)
	}
	term, err := sb.StartTerminal(context.Background(), sandbox.TerminalRequest{Argv: []string{"sh", "-c",
		`echo "len=${#SPEC_SECRET} req=$REQ"; ls /tmp/.agentbox-term-* 2>/dev/null | wc -l; echo "end-$((1+1))"; exit 0`},
		Env: map[string]string{"REQ": "from-request"}})
	if err != nil {
		t.Fatal(err)
	}
	defer term.Close()
	done := make(chan []byte)
	go func() { b, _ := io.ReadAll(term); done <- b }()
	var out string
	select {
	case b := <-done:
		out = string(b)
	case <-time.After(30 * time.Second):
		t.Fatal("the terminal did not end")
	}
	if strings.Contains(out, secret) || !strings.Contains(out, "len=17 req=from-request") || !strings.Contains(out, "0\r\nend-2") {
		t.Errorf("terminal output:\n%q", out)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if code, err := term.Wait(ctx); code != 0 || err != nil {
		t.Errorf("wait = %d, %v", code, err)
	}
}
