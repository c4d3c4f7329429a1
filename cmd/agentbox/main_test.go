package main

import (
	"strings"
	"testing"
)

func TestDispatch(t *testing.T) {
	t.Parallel()
	tests := []struct {
		args []string
		code int
		out  string // on stdout
		err  string // on stderr
	}{
		{nil, 0, "usage: agentbox COMMAND", ""},
		{[]string{"help"}, 0, "Run 'agentbox help COMMAND' for a command's flags", ""},
		{[]string{"--help"}, 0, "commands:\n", ""},
		{[]string{"help", "serve"}, 0, "usage: agentbox serve [--app DIR]", ""},
		{[]string{"help", "serve"}, 0, "  --drain-timeout DURATION", ""},
		{[]string{"help", "run"}, 0, "  --json ", ""},
		{[]string{"help", "workspaces"}, 0, "usage: agentbox workspaces list", ""},
		{[]string{"help", "workspaces", "prune"}, 0, "  --older-than OLDER_THAN", ""},
		{[]string{"help", "skills", "reject"}, 0, "  --reason REASON", ""},
		{[]string{"help", "serv"}, 2, "", `unknown command "serv" (did you mean "serve"?)`},
		{[]string{"serv"}, 2, "", "agentbox: unknown command \"serv\" (did you mean \"serve\"?)\nRun 'agentbox help' for the list of commands.\n"},
		{[]string{"work"}, 2, "", `(did you mean "workspaces"?)`},
		{[]string{"frobnicate"}, 2, "", "agentbox: unknown command \"frobnicate\"\n"},
		{[]string{"--app", "x"}, 2, "", "unknown flag --app (flags go after the command"},
		{[]string{"--version"}, 0, "agentbox ", ""},
		{[]string{"version"}, 0, "agentbox ", ""},
		{[]string{"serve", "--adr", "x"}, 2, "", "agentbox serve: unknown flag --adr (did you mean --addr?)"},
		{[]string{"skills", "lst"}, 2, "", `agentbox skills: unknown subcommand "lst" (did you mean "list"?)`},
	}
	for _, tt := range tests {
		code, out, errs := runCLI(tt.args...)
		if code != tt.code || !strings.Contains(out, tt.out) || !strings.Contains(errs, tt.err) {
			t.Errorf("agentbox %q: exit %d\nstdout %q\nstderr %q\nwant exit %d, %q, %q", tt.args, code, out, errs, tt.code, tt.out, tt.err)
		}
	}
}
