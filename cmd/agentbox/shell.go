package main

import (
	"context"
	"fmt"
	"io"
	"os"
	"os/signal"
	"syscall"

	"golang.org/x/term"

	"github.com/agentbox/agentbox/pipeline"
	"github.com/agentbox/agentbox/sandbox"
)

const shellUsage = `usage: agentbox shell --chat C [--user U] [--app DIR] [--assistant A]

Opens an interactive shell in a sandbox of the chat: a new sandbox with the
chat's workspace at /workspace, made like its assistant's (the same
runtime, image, limits, hardening and network policy). The terminal is
put in raw mode and its size follows yours; the sandbox is removed when
the shell exits. The exit status is the shell's (1 when the shell could
not start, 2 on bad usage).
`

// shellStdin is the terminal's input (a variable for tests).
var shellStdin io.Reader = os.Stdin

func runShell(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	fl := newFlags("shell", shellUsage, stdout, stderr)
	appDir := fl.appFlag()
	user := fl.String("user", "cli", "the user whose chat it is")
	chatID := fl.String("chat", "", "the chat (required)")
	assistantID := fl.String("assistant", "", "the assistant whose sandbox settings the shell gets (default: the chat's)")
	runtimeName := fl.String("runtime", "", "sandbox runtime when the app names none: docker or local (default: docker when an engine answers, else local)")
	args, exit, ok := fl.parse(args)
	if !ok {
		return exit
	}
	if len(args) > 0 {
		return fl.usageError("unexpected argument %q", args[0])
	}
	if *chatID == "" {
		return fl.usageError("--chat is required (agentbox run prints a new chat's id; agentbox workspaces list lists them)")
	}
	for _, c := range []struct{ kind, v string }{{"user", *user}, {"chat", *chatID}} {
		if err := sandbox.ValidateID(c.kind, c.v); err != nil {
			fmt.Fprintf(stderr, "agentbox shell: --%s: %v\n", c.kind, err)
			return 2
		}
	}
	env, err := openEnv(ctx, envOptions{AppDir: *appDir, Logger: cliLogger(stderr, false), Assistant: *assistantID, Runtime: *runtimeName})
	if err != nil {
		fmt.Fprintf(stderr, "agentbox shell: %v\n", err)
		return 1
	}
	defer env.Close(context.WithoutCancel(ctx))

	in, out := shellStdin, stdout
	inFile, _ := in.(*os.File)
	outFile, _ := out.(*os.File)
	tty := inFile != nil && term.IsTerminal(int(inFile.Fd()))
	req := pipeline.TerminalRequest{UserID: *user, ChatID: *chatID, AssistantID: *assistantID}
	if outFile != nil && term.IsTerminal(int(outFile.Fd())) {
		if w, h, err := term.GetSize(int(outFile.Fd())); err == nil && w > 0 && h > 0 {
			req.Cols, req.Rows = uint16(min(w, 1000)), uint16(min(h, 1000))
		}
	}
	t, err := env.Pipeline.OpenTerminal(ctx, req)
	if err != nil {
		fmt.Fprintf(stderr, "agentbox shell: %v\n", err)
		return 1
	}
	defer t.Close()

	if tty {
		old, err := term.MakeRaw(int(inFile.Fd()))
		if err != nil {
			fmt.Fprintf(stderr, "agentbox shell: raw mode: %v\n", err)
			return 1
		}
		defer term.Restore(int(inFile.Fd()), old)
	}
	if outFile != nil {
		winch := make(chan os.Signal, 1)
		signal.Notify(winch, syscall.SIGWINCH)
		defer signal.Stop(winch)
		go func() {
			for range winch {
				if w, h, err := term.GetSize(int(outFile.Fd())); err == nil && w > 0 && h > 0 {
					_ = t.Resize(ctx, uint16(min(h, 1000)), uint16(min(w, 1000)))
				}
			}
		}()
	}
	go func() { _, _ = io.Copy(t, in) }()
	copied := make(chan struct{})
	go func() { _, _ = io.Copy(out, t); close(copied) }()
	code, err := t.Wait(ctx)
	if err != nil {
		if tty {
			fmt.Fprint(stderr, "\r\n")
		}
		fmt.Fprintf(stderr, "agentbox shell: %v\n", err)
		return 1
	}
	<-copied
	return code
}
