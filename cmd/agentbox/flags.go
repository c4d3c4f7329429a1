package main

import (
	"errors"
	"flag"
	"fmt"
	"io"
	"slices"
	"sort"
	"strings"
	"text/tabwriter"

	"github.com/agentbox/agentbox/internal/hint"
)

// flags is the command-line layer every subcommand shares, on top of the
// standard flag package: flags go anywhere on the line (`run qa "hi"
// --json`), "--" ends them (`run qa -- --json` sends "--json"), -h and
// --help print the usage on stdout, and a bad flag is said in one line
// with a "did you mean" and where to read more, exit status 2.
type flags struct {
	*flag.FlagSet
	// cmd is the command as typed after agentbox: "run", "workspaces list".
	cmd string
	// usage is the text above the flag list: the synopsis ("usage: ..."
	// lines), a blank line, what the command does.
	usage          string
	stdout, stderr io.Writer
}

func newFlags(cmd, usage string, stdout, stderr io.Writer) *flags {
	fs := flag.NewFlagSet(cmd, flag.ContinueOnError)
	fs.SetOutput(io.Discard) // every message is ours
	return &flags{FlagSet: fs, cmd: cmd, usage: usage, stdout: stdout, stderr: stderr}
}

// appFlag adds --app, the app folder: the current folder unless given,
// the same for every command.
func (f *flags) appFlag() *string {
	return f.String("app", ".", "the app folder `DIR` (default: the current folder)")
}

// errHelp ends a command after its usage was printed (-h, --help).
var errHelp = errors.New("help printed")

// parse sets the flags in args, wherever they are, and returns the other
// arguments in order. ok is false when the command must end at once with
// code: 0 after -h or --help (the usage is on stdout), 2 after a bad flag
// (said on stderr).
func (f *flags) parse(args []string) (pos []string, code int, ok bool) {
	pos, err := f.parseArgs(args)
	switch {
	case err == nil:
		return pos, 0, true
	case errors.Is(err, errHelp):
		f.printUsage(f.stdout)
		return nil, 0, false
	default:
		return nil, f.usageError("%v", err), false
	}
}

func (f *flags) parseArgs(args []string) ([]string, error) {
	var pos []string
	for i := 0; i < len(args); i++ {
		a := args[i]
		if a == "--" {
			return append(pos, args[i+1:]...), nil
		}
		if len(a) < 2 || a[0] != '-' {
			pos = append(pos, a) // "-" too: a prompt read from stdin
			continue
		}
		name, value, hasValue := strings.Cut(strings.TrimPrefix(strings.TrimPrefix(a, "-"), "-"), "=")
		if name == "h" || name == "help" {
			return nil, errHelp
		}
		fl := f.Lookup(name)
		if fl == nil || name == "" || strings.HasPrefix(name, "-") {
			return nil, f.unknownFlag(a, name)
		}
		if b, isBool := fl.Value.(interface{ IsBoolFlag() bool }); isBool && b.IsBoolFlag() {
			if !hasValue {
				value = "true"
			}
		} else if !hasValue {
			if i+1 >= len(args) {
				return nil, fmt.Errorf("flag --%s needs a value (%s)", name, flagHelp(fl))
			}
			i++
			value = args[i]
		}
		if err := f.Set(name, value); err != nil {
			return nil, fmt.Errorf("invalid value %q for --%s: %v", value, name, err)
		}
	}
	return pos, nil
}

// unknownFlag says that arg (name without dashes) is no flag of the
// command, with the closest one when it is close.
func (f *flags) unknownFlag(arg, name string) error {
	var names []string
	f.VisitAll(func(fl *flag.Flag) { names = append(names, fl.Name) })
	msg := fmt.Sprintf("unknown flag %s", arg)
	if c := hint.Closest(name, names); c != "" {
		msg += fmt.Sprintf(" (did you mean --%s?)", c)
	} else if len(arg) > 1 && arg[1] >= '0' && arg[1] <= '9' || strings.Contains(arg, " ") {
		msg += " (an argument that starts with - goes after --)"
	}
	return errors.New(msg)
}

// usageError says what was wrong with the command line, then the
// command's synopsis and where its help is, and returns exit status 2.
func (f *flags) usageError(format string, a ...any) int {
	fmt.Fprintf(f.stderr, "agentbox %s: %s\n", f.cmd, fmt.Sprintf(format, a...))
	if syn := synopsis(f.usage); syn != "" {
		fmt.Fprint(f.stderr, syn)
	}
	fmt.Fprintf(f.stderr, "Run 'agentbox help %s' for its flags.\n", f.cmd)
	return 2
}

// synopsis is the "usage: ..." lines that start a usage text.
func synopsis(usage string) string {
	head, _, _ := strings.Cut(usage, "\n\n")
	if !strings.HasPrefix(head, "usage:") {
		return ""
	}
	return head + "\n"
}

// printUsage writes the usage text and the flags, as `--name VALUE  what
// it is (default ...)`, sorted.
func (f *flags) printUsage(w io.Writer) {
	fmt.Fprint(w, strings.TrimRight(f.usage, "\n")+"\n")
	var all []*flag.Flag
	f.VisitAll(func(fl *flag.Flag) { all = append(all, fl) })
	if len(all) == 0 {
		return
	}
	sort.Slice(all, func(i, j int) bool { return all[i].Name < all[j].Name })
	fmt.Fprintln(w, "\nflags:")
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	for _, fl := range all {
		fmt.Fprintf(tw, "  --%s\t%s\n", flagWithValue(fl), flagHelp(fl))
	}
	_ = tw.Flush()
}

// flagWithValue is "app DIR" for --app: the word in backquotes in its
// usage, else one made from its type, nothing for a bool.
func flagWithValue(fl *flag.Flag) string {
	name, _ := flag.UnquoteUsage(fl)
	switch name {
	case "":
		return fl.Name
	case "string":
		name = strings.ToUpper(strings.ReplaceAll(fl.Name, "-", "_"))
	case "duration":
		name = "DURATION"
	case "int", "uint", "int64", "uint64", "float":
		name = "N"
	}
	return fl.Name + " " + name
}

// flagHelp is the flag's usage, without the value's name in backquotes
// (flagWithValue shows it), with its default unless the usage says it or
// it is the zero value.
func flagHelp(fl *flag.Flag) string {
	usage := fl.Usage
	if i := strings.IndexByte(usage, '`'); i >= 0 {
		if j := strings.IndexByte(usage[i+1:], '`'); j >= 0 {
			usage = strings.Join(strings.Fields(usage[:i]+usage[i+j+2:]), " ")
		}
	}
	switch fl.DefValue {
	case "", "0", "false", "0s", "[]":
	default:
		if !strings.Contains(usage, "default") {
			if name, _ := flag.UnquoteUsage(fl); name == "string" {
				usage += fmt.Sprintf(" (default %q)", fl.DefValue)
			} else {
				usage += fmt.Sprintf(" (default %s)", fl.DefValue)
			}
		}
	}
	return usage
}

// subcommand is one of a command's subcommands (`workspaces list`).
type subcommand struct {
	name    string
	aliases []string
	run     func(args []string) int
}

// dispatchSub runs the subcommand args[0] of cmd, printing usage for none
// or help, and "did you mean" for an unknown one.
func dispatchSub(cmd, usage string, subs []subcommand, args []string, stdout, stderr io.Writer) int {
	if len(args) == 0 || args[0] == "-h" || args[0] == "--help" || args[0] == "help" {
		fmt.Fprint(stdout, usage)
		return 0
	}
	var names []string
	for _, s := range subs {
		if s.name == args[0] || slices.Contains(s.aliases, args[0]) {
			return s.run(args[1:])
		}
		names = append(names, s.name)
	}
	return unknownSub(cmd, usage, args[0], names, stderr)
}

// unknownSub says that sub is no subcommand of cmd (names), with the one
// it was likely meant to be, and returns exit status 2.
func unknownSub(cmd, usage, sub string, names []string, stderr io.Writer) int {
	msg := fmt.Sprintf("agentbox %s: unknown subcommand %q", cmd, sub)
	if c := closestName(sub, names); c != "" {
		msg += fmt.Sprintf(" (did you mean %q?)", c)
	}
	fmt.Fprintf(stderr, "%s\n%sRun 'agentbox help %s' for more.\n", msg, synopsis(usage), cmd)
	return 2
}

// closestName is the name among names that name was likely meant to be:
// the closest by edit distance, else the only one it starts.
func closestName(name string, names []string) string {
	if c := hint.Closest(name, names); c != "" {
		return c
	}
	var found []string
	for _, n := range names {
		if name != "" && strings.HasPrefix(n, name) {
			found = append(found, n)
		}
	}
	if len(found) == 1 {
		return found[0]
	}
	return ""
}
