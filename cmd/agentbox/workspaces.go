package main

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"time"

	"github.com/agentbox/agentbox/assistant"
	"github.com/agentbox/agentbox/internal/units"
	"github.com/agentbox/agentbox/sandbox"
)

func runWorkspaces(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	usage := func(w io.Writer) {
		fmt.Fprintln(w, "usage: agentbox workspaces prune [--app DIR | --data DIR] [--older-than 7d] [--dry-run] [--json]")
	}
	if len(args) == 0 || args[0] == "-h" || args[0] == "--help" || args[0] == "help" {
		usage(stdout)
		return 0
	}
	switch args[0] {
	case "prune":
		return runWorkspacesPrune(ctx, args[1:], stdout, stderr)
	default:
		fmt.Fprintf(stderr, "agentbox workspaces: unknown subcommand %q\n", args[0])
		usage(stderr)
		return 2
	}
}

func runWorkspacesPrune(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	fl := flag.NewFlagSet("workspaces prune", flag.ContinueOnError)
	fl.SetOutput(stderr)
	appDir := fl.String("app", "", "the app folder (its app.jsonc gives data_root and cleanup.retention)")
	dataDir := fl.String("data", "", "the data root holding workspaces/ (instead of --app)")
	olderThan := fl.String("older-than", "", `remove workspaces unused for this long: "7d", "36h", "1d12h" (default: the app's cleanup.retention, else 7d)`)
	dryRun := fl.Bool("dry-run", false, "only report what would be removed")
	asJSON := fl.Bool("json", false, "print the report as JSON")
	fl.Usage = func() {
		fmt.Fprintln(stderr, "usage: agentbox workspaces prune [--app DIR | --data DIR] [--older-than 7d] [--dry-run] [--json]\n\n"+
			"Removes chat workspaces not used within the retention period, never one in use\nby a running request, and lists what was (or would be) removed.\n\nflags:")
		fl.PrintDefaults()
	}
	if err := fl.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return 0
		}
		return 2
	}
	if fl.NArg() > 0 {
		fmt.Fprintf(stderr, "agentbox workspaces prune: unexpected argument %q\n", fl.Arg(0))
		return 2
	}
	if (*appDir == "") == (*dataDir == "") {
		fmt.Fprintln(stderr, "agentbox workspaces prune: give exactly one of --app DIR or --data DIR")
		return 2
	}
	retention := sandbox.DefaultRetention
	root := *dataDir
	if *appDir != "" {
		app, err := assistant.Load(*appDir)
		if err != nil {
			fmt.Fprintf(stderr, "agentbox workspaces prune: %v\n", err)
			return 1
		}
		root = app.Config.DataRoot
		if app.Config.Cleanup.Retention > 0 {
			retention = app.Config.Cleanup.Retention
		}
	}
	if *olderThan != "" {
		d, err := parseAge(*olderThan)
		if err != nil {
			fmt.Fprintf(stderr, "agentbox workspaces prune: --older-than: %v\n", err)
			return 2
		}
		retention = d
	}
	if st, err := os.Stat(root); err != nil || !st.IsDir() {
		fmt.Fprintf(stderr, "agentbox workspaces prune: data root %s is not a folder\n", root)
		return 1
	}
	if _, err := os.Stat(filepath.Join(root, "workspaces")); errors.Is(err, os.ErrNotExist) {
		fmt.Fprintf(stdout, "no workspaces under %s\n", root)
		return 0
	}
	wss, err := sandbox.NewWorkspaces(root, -1, -1)
	if err != nil {
		fmt.Fprintf(stderr, "agentbox workspaces prune: %v\n", err)
		return 1
	}
	rep, err := wss.Prune(ctx, sandbox.PruneOptions{OlderThan: retention, DryRun: *dryRun})
	if rep != nil {
		if *asJSON {
			enc := json.NewEncoder(stdout)
			enc.SetIndent("", "  ")
			_ = enc.Encode(rep)
		} else {
			printPruneReport(stdout, rep, retention)
		}
	}
	if err != nil {
		fmt.Fprintf(stderr, "agentbox workspaces prune: %v\n", err)
		return 1
	}
	return 0
}

func printPruneReport(w io.Writer, rep *sandbox.PruneReport, retention time.Duration) {
	verb := "removed"
	if rep.DryRun {
		verb = "would remove"
	}
	for _, p := range rep.Removed {
		fmt.Fprintf(w, "%s %s/%s (last used %s, %s)\n", verb, p.User, p.Chat, p.LastUse.Format(time.DateTime), units.FormatBytes(p.Bytes))
	}
	for _, p := range rep.InUse {
		fmt.Fprintf(w, "kept %s/%s: in use (last used %s)\n", p.User, p.Chat, p.LastUse.Format(time.DateTime))
	}
	fmt.Fprintf(w, "%s %d workspace(s), %s; %d in use, %d used within %s\n",
		verb, len(rep.Removed), units.FormatBytes(rep.FreedBytes), len(rep.InUse), rep.Kept, units.FormatDuration(retention))
}

// parseAge reads --older-than: a positive duration that may start with
// whole days ("7d", "36h", "1d12h", "90m").
func parseAge(s string) (time.Duration, error) {
	d, err := units.ParseDuration(s)
	if err != nil {
		return 0, fmt.Errorf("%w: use units d, h, m (\"7d\", \"36h\")", err)
	}
	if d <= 0 {
		return 0, fmt.Errorf("duration %q must be positive", s)
	}
	return d, nil
}
