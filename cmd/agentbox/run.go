package main

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"io"
	"os"
	"strings"
	"sync"
	"time"

	"github.com/agentbox/agentbox/chat"
	"github.com/agentbox/agentbox/jsapi"
	"github.com/agentbox/agentbox/pipeline"
	"github.com/agentbox/agentbox/sandbox"
)

const runUsage = `usage: agentbox run [--app DIR] [--user U] [--chat C [--rewind N | --fork N]] [--json] [--previews MODE] ASSISTANT PROMPT...

Runs one chat turn of ASSISTANT through the pipeline (no HTTP server) and
streams its events to the terminal: the answer as it comes, thinking
dimmed, tool calls and results one line each. PROMPT "-" reads the prompt
from stdin; a prompt that starts with - goes after -- (run qa -- -x). With
--chat the turn continues that chat's history and workspace. --rewind N
first brings the chat back to its state after turn N (files, the CLI's
session, hook memory, history); --fork N first starts a new chat from that
state and runs the turn there. Either may go without a PROMPT: the chat is
then rewound or forked, and no turn runs. Exit status 1 when the turn
fails, 2 on bad usage.

An assistant that declares ports (sandbox.ports, computer.ports, a
desktop) gets their previews served on a loopback listener of the run
(--preview-addr): each port's URL prints when a server starts listening
on it. After the answer, while the chat's sandbox lives (sandbox.keep_alive),
--previews wait keeps serving them until Ctrl-C or until the sandbox
stops; exit ends with the answer; auto (the default) waits when stderr is
a terminal.
`

// runStdin is the prompt source for PROMPT "-" (a variable for tests).
var runStdin io.Reader = os.Stdin

func runRun(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	fl := newFlags("run", runUsage, stdout, stderr)
	appDir := fl.appFlag()
	user := fl.String("user", "cli", "the user id the turn runs as")
	chatID := fl.String("chat", "", "the chat id (default: a new chat)")
	asJSON := fl.Bool("json", false, "print events as JSON lines")
	runtimeName := fl.String("runtime", "", "sandbox runtime when the app names none: docker, kubernetes or local (default: docker when an engine answers, else local)")
	rewind := fl.Int("rewind", 0, "rewind the --chat to its state after turn `N` first (turns counted from 1)")
	fork := fl.Int("fork", 0, "fork the --chat at turn `N` first, and run the turn in the new chat")
	previews := fl.String("previews", previewsAuto, "after the answer, keep serving the sandbox's previews until Ctrl-C: `wait`, exit, or auto (wait on a terminal)")
	previewAddr := fl.String("preview-addr", "127.0.0.1:0", "the loopback `address` the previews are served on (port 0: any free port)")
	kubeconfig := fl.String("kubeconfig", "", "kubeconfig of the kubernetes runtime (default: sandbox.kubernetes.kubeconfig in app.jsonc, else $KUBECONFIG, the in-cluster service account, ~/.kube/config)")
	args, code, ok := fl.parse(args)
	if !ok {
		return code
	}
	branch := *rewind != 0 || *fork != 0
	switch {
	case *rewind != 0 && *fork != 0:
		return fl.usageError("--rewind and --fork: one or the other")
	case branch && *chatID == "":
		return fl.usageError("--rewind and --fork need the --chat to rewind or fork")
	case *rewind < 0 || *fork < 0:
		return fl.usageError("--rewind and --fork take a turn, counted from 1")
	case len(args) < 1, len(args) < 2 && !branch:
		return fl.usageError("want ASSISTANT and PROMPT")
	}
	if err := checkPreviewFlags(*previews, *previewAddr); err != nil {
		return fl.usageError("%v", err)
	}
	assistantID := args[0]
	prompt := strings.Join(args[1:], " ")
	if prompt == "-" {
		b, err := io.ReadAll(runStdin)
		if err != nil {
			fmt.Fprintf(stderr, "agentbox run: read prompt: %v\n", err)
			return 1
		}
		prompt = strings.TrimSpace(string(b))
	}
	if strings.TrimSpace(prompt) == "" && (!branch || len(args) > 1) {
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
	env, err := openEnv(ctx, envOptions{AppDir: *appDir, Logger: logger, Assistant: assistantID, Runtime: *runtimeName, Kubeconfig: *kubeconfig,
		Previews: runPreviewConfig()})
	if err != nil {
		fmt.Fprintf(stderr, "agentbox run: %v\n", err)
		return 1
	}
	defer env.Close(context.WithoutCancel(ctx))
	if branch {
		id, err := runBranch(ctx, env.Pipeline, *user, *chatID, *rewind, *fork, stderr)
		if err != nil {
			fmt.Fprintf(stderr, "agentbox run: %v\n", err)
			return 1
		}
		*chatID, newChat = id, *fork != 0
		if strings.TrimSpace(prompt) == "" {
			if newChat {
				fmt.Fprintln(stdout, id)
			}
			return 0
		}
	}

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
	// Closed before the env (defers run last first): the sandbox goes after.
	pv, err := startRunPreviews(ctx, env.Previews, env.Pipeline.App().Assistants[assistantID], *previewAddr, *user, *chatID)
	if err != nil {
		fmt.Fprintf(stderr, "agentbox run: %v\n", err)
		return 1
	}
	defer pv.Close()
	req := &pipeline.Request{
		UserID: *user, ChatID: *chatID, AssistantID: assistantID,
		Messages: []chat.Message{{Role: chat.RoleUser, Content: prompt}},
	}
	asker := newRunAsker(env.Pipeline, *user, *chatID, runStdin, stderr, spin)
	_, err = env.Pipeline.Chat(ctx, req, func(e chat.Event) {
		e = pv.event(e)
		r.Event(e)
		asker.event(e)
	})
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
		if stack := jsapi.Stack(err); stack != "" && !*asJSON {
			// Where in the hook source it failed, for the app's author.
			fmt.Fprintln(stderr, r.dim(stack))
		}
		return 1
	}
	if !*asJSON {
		a := env.Pipeline.App().Assistants[assistantID]
		for _, line := range nextSteps(*appDir, *user, *chatID, assistantID, newChat, a != nil && a.Sandbox != nil) {
			fmt.Fprintln(stderr, r.dim(line))
		}
	}
	pv.afterAnswer(ctx, *previews == previewsWait || *previews == previewsAuto && isTerminal(stderr), stderr, r.dim)
	return 0
}

// runBranch rewinds the user's chat to turn rewind, or forks it at turn
// fork, saying so on stderr, and returns the chat the turn runs in.
func runBranch(ctx context.Context, p *pipeline.Pipeline, user, chatID string, rewind, fork int, stderr io.Writer) (string, error) {
	if rewind != 0 {
		rw, err := p.Rewind(ctx, user, chatID, pipeline.Target{Turn: rewind})
		if err != nil {
			return "", err
		}
		fmt.Fprintf(stderr, "chat %s rewound to turn %d (%d messages; %d files written, %d removed)\n", chatID, rw.Turn, rw.Messages, rw.Written, rw.Removed)
		return chatID, nil
	}
	id, err := p.Fork(ctx, user, chatID, pipeline.Target{Turn: fork})
	if err != nil {
		return "", err
	}
	fmt.Fprintf(stderr, "chat %s forked at turn %d: %s\n", chatID, fork, id)
	return id, nil
}

// nextSteps are the lines run ends a turn with: how to continue the chat
// (a new one) and how to see its workspace's files (a sandboxed turn),
// with the flags that name the same app and user.
func nextSteps(appDir, user, chatID, assistantID string, newChat, sandboxed bool) []string {
	same := ""
	if appDir != "." {
		same += " --app " + shellQuote(appDir)
	}
	if user != "cli" {
		same += " --user " + shellQuote(user)
	}
	var out []string
	if newChat {
		out = append(out, fmt.Sprintf("continue this chat: agentbox run%s --chat %s %s \"...\"", same, chatID, assistantID))
	}
	if sandboxed {
		out = append(out, fmt.Sprintf("see its files:      agentbox workspaces mount%s --chat %s -- ls -la  (or agentbox shell%s --chat %s)", same, chatID, same, chatID))
	}
	return out
}

// shellQuote quotes s for a shell when it needs it.
func shellQuote(s string) string {
	if s != "" && strings.Trim(s, "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789_./:=@%+,-") == "" {
		return s
	}
	return "'" + strings.ReplaceAll(s, "'", `'\''`) + "'"
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
