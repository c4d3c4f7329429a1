package main

import (
	"bytes"
	"slices"
	"strings"
	"testing"
	"time"
)

// TestFlagsAnywhere: flags go before, between and after the arguments;
// "--" ends them; "-" is an argument.
func TestFlagsAnywhere(t *testing.T) {
	t.Parallel()
	tests := []struct {
		args    []string
		pos     []string
		json    bool
		user    string
		timeout time.Duration
	}{
		{[]string{"scribe", "hi", "--json"}, []string{"scribe", "hi"}, true, "cli", 0},
		{[]string{"--json", "scribe", "hi"}, []string{"scribe", "hi"}, true, "cli", 0},
		{[]string{"scribe", "--user", "bob", "hi", "there"}, []string{"scribe", "hi", "there"}, false, "bob", 0},
		{[]string{"scribe", "--user=bob", "-json", "hi"}, []string{"scribe", "hi"}, true, "bob", 0},
		{[]string{"scribe", "--", "--json", "-x"}, []string{"scribe", "--json", "-x"}, false, "cli", 0},
		{[]string{"scribe", "-", "--json=false"}, []string{"scribe", "-"}, false, "cli", 0},
		{[]string{"--timeout", "2m", "a"}, []string{"a"}, false, "cli", 2 * time.Minute},
		{[]string{"a", "--user", "--"}, []string{"a"}, false, "--", 0}, // a value, not the end of flags
	}
	for _, tt := range tests {
		var out, errb bytes.Buffer
		fl := newFlags("run", "usage: agentbox run X\n\nRuns.\n", &out, &errb)
		asJSON := fl.Bool("json", false, "JSON")
		user := fl.String("user", "cli", "the user")
		timeout := fl.Duration("timeout", 0, "how long")
		pos, code, ok := fl.parse(tt.args)
		if !ok {
			t.Errorf("%q: exit %d: %s", tt.args, code, errb.String())
			continue
		}
		if !slices.Equal(pos, tt.pos) || *asJSON != tt.json || *user != tt.user || *timeout != tt.timeout {
			t.Errorf("%q: args %q json %v user %q timeout %v; want %q %v %q %v", tt.args, pos, *asJSON, *user, *timeout, tt.pos, tt.json, tt.user, tt.timeout)
		}
	}
}

func TestFlagsErrors(t *testing.T) {
	t.Parallel()
	tests := []struct {
		args []string
		code int
		out  string // on stdout
		err  string // on stderr
	}{
		{[]string{"--jsn"}, 2, "", "agentbox run: unknown flag --jsn (did you mean --json?)\nusage: agentbox run X\nRun 'agentbox help run' for its flags.\n"},
		{[]string{"a", "--bogus"}, 2, "", "unknown flag --bogus\n"},
		{[]string{"-5"}, 2, "", "unknown flag -5 (an argument that starts with - goes after --)"},
		{[]string{"---json"}, 2, "", "unknown flag ---json"},
		{[]string{"--user"}, 2, "", "flag --user needs a value (the user"},
		{[]string{"--timeout", "soon"}, 2, "", `invalid value "soon" for --timeout`},
		{[]string{"--json=maybe"}, 2, "", `invalid value "maybe" for --json`},
		{[]string{"a", "-h"}, 0, "usage: agentbox run X\n\nRuns.\n\nflags:\n  --json", ""},
		{[]string{"--help"}, 0, "--timeout DURATION  how long\n  --user USER", ""},
	}
	for _, tt := range tests {
		var out, errb bytes.Buffer
		fl := newFlags("run", "usage: agentbox run X\n\nRuns.\n", &out, &errb)
		fl.Bool("json", false, "JSON")
		fl.String("user", "cli", "the user")
		fl.Duration("timeout", 0, "how long")
		_, code, ok := fl.parse(tt.args)
		if ok || code != tt.code || !strings.Contains(out.String(), tt.out) || !strings.Contains(errb.String(), tt.err) {
			t.Errorf("%q: ok %v exit %d\nstdout %q\nstderr %q\nwant exit %d, %q, %q", tt.args, ok, code, out.String(), errb.String(), tt.code, tt.out, tt.err)
		}
	}
}

// TestFlagsUsage: the flag list names each flag with its value and
// default.
func TestFlagsUsage(t *testing.T) {
	t.Parallel()
	var out bytes.Buffer
	fl := newFlags("x", "usage: agentbox x\n", &out, &out)
	fl.appFlag()
	fl.Int("n", 3, "how many")
	fl.String("older-than", "", "an age (default: 7d)")
	fl.String("data", "", "the data root `DIR` holding workspaces/")
	fl.String("user", "cli", "the user")
	fl.printUsage(&out)
	want := "usage: agentbox x\n\nflags:\n" +
		"  --app DIR                the app folder (default: the current folder)\n" +
		"  --data DIR               the data root holding workspaces/\n" +
		"  --n N                    how many (default 3)\n" +
		"  --older-than OLDER_THAN  an age (default: 7d)\n" +
		"  --user USER              the user (default \"cli\")\n"
	if out.String() != want {
		t.Errorf("usage:\n%s\nwant:\n%s", out.String(), want)
	}
}
