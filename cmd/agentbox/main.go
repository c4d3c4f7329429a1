// Command agentbox turns a folder of assistant definitions into a streaming
// chat API. Run `agentbox help` for the subcommands.
package main

import (
	"context"
	"fmt"
	"io"
	"os"
	"os/signal"
	"sort"
	"syscall"
)

// command is one subcommand. run gets the arguments after the subcommand
// name and returns the process exit status.
type command struct {
	summary string
	run     func(ctx context.Context, args []string, stdout, stderr io.Writer) int
}

// commands is the explicit registry of subcommands, one file each.
var commands = map[string]command{
	"serve":      {"serve the chat API for an app folder", runServe},
	"run":        {"run one chat turn and stream its events to the terminal", runRun},
	"shell":      {"open an interactive shell in a sandbox of a chat", runShell},
	"check":      {"load an app folder and report every problem", runCheck},
	"test":       {"run the app's assistant tests (Yao's JSONL cases and *_test.ts files)", runTest},
	"workspaces": {"manage chat workspaces (prune)", runWorkspaces},
	"skills":     {"list, approve, reject and test the skills agents proposed", runSkills},
	"version":    {"print the version", runVersion},
	"bridge":     {"run inside a sandbox: MCP stdio server and model proxy forwarding to the host", runBridge},
}

func main() {
	// A closed stdout or stderr (`agentbox run ... | head`) must surface as
	// a write error the command handles (stop the turn, remove its
	// sandbox), not kill the process before it cleans up.
	signal.Ignore(syscall.SIGPIPE)
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	code := dispatch(ctx, os.Args[1:], os.Stdout, os.Stderr)
	stop()
	os.Exit(code)
}

func dispatch(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	if len(args) == 0 || args[0] == "help" || args[0] == "-h" || args[0] == "--help" {
		usage(stdout)
		return 0
	}
	cmd, ok := commands[args[0]]
	if !ok {
		fmt.Fprintf(stderr, "agentbox: unknown command %q\n\n", args[0])
		usage(stderr)
		return 2
	}
	return cmd.run(ctx, args[1:], stdout, stderr)
}

func usage(w io.Writer) {
	fmt.Fprintln(w, "usage: agentbox COMMAND [flags]\n\ncommands:")
	names := make([]string, 0, len(commands))
	for n := range commands {
		names = append(names, n)
	}
	sort.Strings(names)
	for _, n := range names {
		fmt.Fprintf(w, "  %-11s %s\n", n, commands[n].summary)
	}
}
