package main

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"strings"
	"sync"
	"time"

	"github.com/agentbox/agentbox/chat"
	"github.com/agentbox/agentbox/pipeline"
	"github.com/agentbox/agentbox/sandbox"
)

const runUsage = `usage: agentbox run [--app DIR] [--user U] [--chat C] [--json] ASSISTANT PROMPT...

Runs one chat turn of ASSISTANT through the pipeline (no HTTP server) and
streams its events to the terminal: the answer as it comes, thinking
dimmed, tool calls and results one line each. PROMPT "-" reads the prompt
from stdin. With --chat the turn continues that chat's history and
workspace. Exit status 1 when the turn fails, 2 on bad usage.

flags:
`

// runStdin is the prompt source for PROMPT "-" (a variable for tests).
var runStdin io.Reader = os.Stdin

func runRun(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	fl := flag.NewFlagSet("run", flag.ContinueOnError)
	fl.SetOutput(stderr)
	appDir := fl.String("app", ".", "the app folder")
	user := fl.String("user", "cli", "the user id the turn runs as")
	chatID := fl.String("chat", "", "the chat id (default: a new chat)")
	asJSON := fl.Bool("json", false, "print events as JSON lines")
	runtimeName := fl.String("runtime", "", "sandbox runtime when the app names none: docker, kubernetes or local (default: docker when an engine answers, else local)")
	kubeconfig := fl.String("kubeconfig", "", "kubeconfig of the kubernetes runtime (default: sandbox.kubernetes.kubeconfig in app.jsonc, else $KUBECONFIG, the in-cluster service account, ~/.kube/config)")
	fl.Usage = func() {
		fmt.Fprint(stderr, runUsage)
		fl.PrintDefaults()
	}
	if err := fl.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return 0
		}
		return 2
	}
	if fl.NArg() < 2 {
		fmt.Fprintln(stderr, "agentbox run: want ASSISTANT and PROMPT")
		fl.Usage()
		return 2
	}
	assistantID := fl.Arg(0)
	prompt := strings.Join(fl.Args()[1:], " ")
	if prompt == "-" {
		b, err := io.ReadAll(runStdin)
		if err != nil {
			fmt.Fprintf(stderr, "agentbox run: read prompt: %v\n", err)
			return 1
		}
		prompt = strings.TrimSpace(string(b))
	}
	if strings.TrimSpace(prompt) == "" {
		fmt.Fprintln(stderr, "agentbox run: the prompt is empty")
		return 2
	}
	if err := sandbox.ValidateID("user", *user); err != nil {
		fmt.Fprintf(stderr, "agentbox run: --user: %v\n", err)
		return 2
	}
	newChat := *chatID == ""
	if newChat {
		var b [3]byte
		_, _ = rand.Read(b[:])
		*chatID = "run-" + time.Now().UTC().Format("20060102-150405") + "-" + hex.EncodeToString(b[:])
	} else if err := sandbox.ValidateID("chat", *chatID); err != nil {
		fmt.Fprintf(stderr, "agentbox run: --chat: %v\n", err)
		return 2
	}

	logger := cliLogger(stderr, *asJSON)
	env, err := openEnv(ctx, envOptions{AppDir: *appDir, Logger: logger, Assistant: assistantID, Runtime: *runtimeName, Kubeconfig: *kubeconfig})
	if err != nil {
		fmt.Fprintf(stderr, "agentbox run: %v\n", err)
		return 1
	}
	defer env.Close(context.WithoutCancel(ctx))

	// Output that can no longer be written (a closed pipe: `run ... | head`)
	// ends the turn like a client going away: the sandbox is removed.
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	out := &cancelOnError{w: stdout, cancel: cancel}
	r := newRenderer(out, renderOptions{JSON: *asJSON, Color: !*asJSON && colorOK(stdout)})
	var spin *spinner
	if !*asJSON && isTerminal(stderr) {
		spin = newSpinner(stderr)
		if a := env.Pipeline.App().Assistants[assistantID]; a != nil && a.Sandbox != nil {
			spin.Start("starting sandbox")
		}
		r.spinner = spin
		defer spin.Stop()
	}
	req := &pipeline.Request{
		UserID: *user, ChatID: *chatID, AssistantID: assistantID,
		Messages: []chat.Message{{Role: chat.RoleUser, Content: prompt}},
	}
	_, err = env.Pipeline.Chat(ctx, req, r.Event)
	spin.Stop()
	r.Finish()
	if werr := out.Err(); werr != nil {
		fmt.Fprintf(stderr, "agentbox run: output closed, turn stopped: %v\n", werr)
		return 1
	}
	if err != nil {
		if !r.SawError() && !*asJSON {
			fmt.Fprintf(stderr, "agentbox run: %v\n", err)
		}
		return 1
	}
	if newChat && !*asJSON {
		fmt.Fprintf(stderr, "%s\n", r.dim("chat "+*chatID+" (continue it with --chat "+*chatID+")"))
	}
	return 0
}

// cancelOnError passes writes through and calls cancel at the first that
// fails, then drops the rest.
type cancelOnError struct {
	w      io.Writer
	cancel context.CancelFunc

	mu  sync.Mutex
	err error
}

func (c *cancelOnError) Write(p []byte) (int, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.err != nil {
		return 0, c.err
	}
	n, err := c.w.Write(p)
	if err != nil {
		c.err = err
		c.cancel()
	}
	return n, err
}

// Err is the first write error, if any.
func (c *cancelOnError) Err() error {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.err
}
