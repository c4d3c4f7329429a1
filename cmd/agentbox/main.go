// Command agentbox turns a folder of assistant definitions into a streaming
// chat API. Run `agentbox help` for the subcommands.
package main

import (
	"context"
	"fmt"
	"io"
	"os"
	"os/signal"
	"slices"
	"sort"
	"strings"
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
	"init":       {"write a minimal app that answers offline", runInit},
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
	if len(args) == 0 {
		usage(stdout)
		return 0
	}
	switch args[0] {
	case "help", "-h", "--help":
		if len(args) == 1 {
			usage(stdout)
			return 0
		}
		// `help CMD [SUB]` is `CMD [SUB] --help`.
		cmd, ok := lookupCommand(args[1], stderr)
		if !ok {
			return 2
		}
		return cmd.run(ctx, append(slices.Clone(args[2:]), "--help"), stdout, stderr)
	case "--version", "-version", "-v":
		return runVersion(ctx, nil, stdout, stderr)
	}
	cmd, ok := lookupCommand(args[0], stderr)
	if !ok {
		return 2
	}
	return cmd.run(ctx, args[1:], stdout, stderr)
}

// lookupCommand finds the subcommand name, or says on stderr that there is
// none, with the one it was likely meant to be.
func lookupCommand(name string, stderr io.Writer) (command, bool) {
	if cmd, ok := commands[name]; ok {
		return cmd, true
	}
	msg := fmt.Sprintf("agentbox: unknown command %q", name)
	if strings.HasPrefix(name, "-") {
		msg = fmt.Sprintf("agentbox: unknown flag %s (flags go after the command: agentbox COMMAND [flags])", name)
	} else if c := closestName(name, commandNames()); c != "" {
		msg += fmt.Sprintf(" (did you mean %q?)", c)
	}
	fmt.Fprintf(stderr, "%s\nRun 'agentbox help' for the list of commands.\n", msg)
	return command{}, false
}

func commandNames() []string {
	names := make([]string, 0, len(commands))
	for n := range commands {
		names = append(names, n)
	}
	sort.Strings(names)
	return names
}

func usage(w io.Writer) {
	fmt.Fprintln(w, "usage: agentbox COMMAND [flags] [arguments]\n\ncommands:")
	for _, n := range commandNames() {
		fmt.Fprintf(w, "  %-11s %s\n", n, commands[n].summary)
	}
	fmt.Fprint(w, `
Every command works on the app in the current folder unless --app DIR
names another. Flags may come anywhere after the command; -- ends them.

  agentbox init myapp && cd myapp     a new app that answers offline
  agentbox run assistant "Hello"      one chat turn in the terminal
  agentbox serve                      the chat API and the web app

Run 'agentbox help COMMAND' for a command's flags, 'agentbox --version'
for the version.
`)
}
