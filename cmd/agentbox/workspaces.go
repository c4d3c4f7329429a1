package main

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/agentbox/agentbox/assistant"
	"github.com/agentbox/agentbox/internal/units"
	"github.com/agentbox/agentbox/sandbox"
)

func runWorkspaces(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	usage := func(w io.Writer) {
		fmt.Fprintln(w, "usage: agentbox workspaces list [--app DIR | --data DIR] [--json]")
		fmt.Fprintln(w, "       agentbox workspaces prune [--app DIR | --data DIR] [--older-than 7d] [--dry-run] [--json]")
	}
	if len(args) == 0 || args[0] == "-h" || args[0] == "--help" || args[0] == "help" {
		usage(stdout)
		return 0
	}
	switch args[0] {
	case "list", "ls":
		return runWorkspacesList(ctx, args[1:], stdout, stderr)
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

// openWorkspaces manages the workspaces of dataRoot for serve and run,
// with disk limits as this host allows (sandbox.DetectDiskMode, said in
// the log), after cleaning what a crashed server left of their disks.
func openWorkspaces(ctx context.Context, dataRoot string, uid, gid int, log *slog.Logger) (*sandbox.Workspaces, error) {
	return openWorkspacesUnlooped(ctx, dataRoot, uid, gid, "", log)
}

// openWorkspacesUnlooped is openWorkspaces with disk limits measured, not
// loop-mounted, when noLoop says why they must not be.
func openWorkspacesUnlooped(ctx context.Context, dataRoot string, uid, gid int, noLoop string, log *slog.Logger) (*sandbox.Workspaces, error) {
	mode, why := sandbox.DiskWatch, noLoop
	if noLoop == "" {
		mode, why = sandbox.DetectDiskMode(ctx, dataRoot)
	}
	if mode == sandbox.DiskLoop {
		log.Debug("workspace disk limits: loop-mounted ext4 images (sandbox.max_disk)")
	} else {
		log.Warn("workspace disk limits are measured, not a filesystem's: a workspace that grows past sandbox.max_disk has its sandbox stopped and what it wrote past the limit deleted", "reason", why)
	}
	ws, err := sandbox.NewWorkspacesWith(dataRoot, sandbox.WorkspacesOptions{UID: uid, GID: gid, Disk: mode,
		KeepMounted: sandbox.DefaultKeepMounted, Logger: log})
	if err != nil {
		return nil, err
	}
	rep, err := ws.Recover(ctx)
	if err != nil {
		log.Warn("workspace disks left by a crash not all cleaned", "error", err)
	}
	if rep != nil && len(rep.Unmounted)+len(rep.Detached)+len(rep.Removed) > 0 {
		log.Info("cleaned workspace disks a crash left", "unmounted", rep.Unmounted, "detached", rep.Detached, "removed", rep.Removed)
	}
	return ws, nil
}

const workspacesListUsage = `usage: agentbox workspaces list [--app DIR | --data DIR] [--json]

Lists the chat workspaces with what each takes on disk, its disk limit
(sandbox.max_disk, for a workspace that is a disk image), its last use and
whether a request uses it, then the data root's total and the free space of
the disk holding it. It only looks: nothing is mounted, locked or changed.

flags:
`

// workspacesList is the JSON answer of `workspaces list --json`.
type workspacesList struct {
	Workspaces []sandbox.WorkspaceInfo `json:"workspaces"`
	Usage      *sandbox.DataUsage      `json:"usage"`
}

func runWorkspacesList(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	fl := flag.NewFlagSet("workspaces list", flag.ContinueOnError)
	fl.SetOutput(stderr)
	appDir := fl.String("app", "", "the app folder (its app.jsonc gives data_root)")
	dataDir := fl.String("data", "", "the data root holding workspaces/ (instead of --app)")
	asJSON := fl.Bool("json", false, "print the list as JSON")
	fl.Usage = func() {
		fmt.Fprint(stderr, workspacesListUsage)
		fl.PrintDefaults()
	}
	if err := fl.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return 0
		}
		return 2
	}
	if fl.NArg() > 0 {
		fmt.Fprintf(stderr, "agentbox workspaces list: unexpected argument %q\n", fl.Arg(0))
		return 2
	}
	if (*appDir == "") == (*dataDir == "") {
		fmt.Fprintln(stderr, "agentbox workspaces list: give exactly one of --app DIR or --data DIR")
		return 2
	}
	root := *dataDir
	if *appDir != "" {
		app, err := assistant.Load(*appDir)
		if err != nil {
			fmt.Fprintf(stderr, "agentbox workspaces list: %v\n", err)
			return 1
		}
		root = app.Config.DataRoot
	}
	if st, err := os.Stat(root); err != nil || !st.IsDir() {
		fmt.Fprintf(stderr, "agentbox workspaces list: data root %s is not a folder\n", root)
		return 1
	}
	if _, err := os.Stat(filepath.Join(root, "workspaces")); errors.Is(err, os.ErrNotExist) {
		fmt.Fprintf(stdout, "no workspaces under %s\n", root)
		return 0
	}
	wss, err := sandbox.NewWorkspaces(root, -1, -1)
	if err != nil {
		fmt.Fprintf(stderr, "agentbox workspaces list: %v\n", err)
		return 1
	}
	list, err := wss.List(ctx)
	if err != nil {
		fmt.Fprintf(stderr, "agentbox workspaces list: %v\n", err)
		return 1
	}
	usage, err := wss.Usage(ctx)
	if err != nil {
		fmt.Fprintf(stderr, "agentbox workspaces list: %v\n", err)
		return 1
	}
	if *asJSON {
		enc := json.NewEncoder(stdout)
		enc.SetIndent("", "  ")
		_ = enc.Encode(workspacesList{Workspaces: list, Usage: usage})
		return 0
	}
	printWorkspaces(stdout, list, usage)
	return 0
}

func printWorkspaces(w io.Writer, list []sandbox.WorkspaceInfo, u *sandbox.DataUsage) {
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "USER\tCHAT\tSIZE\tLIMIT\tLAST USE\tSTATE")
	for _, i := range list {
		limit := "-"
		if i.Limit > 0 {
			limit = units.FormatBytes(i.Limit)
		}
		var state []string
		if i.InUse {
			state = append(state, "in use")
		}
		if i.Mounted {
			state = append(state, "mounted")
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%s\n", i.User, i.Chat, units.FormatBytes(i.Bytes), limit,
			i.LastUse.Local().Format(time.DateTime), strings.Join(state, ", "))
	}
	_ = tw.Flush()
	fmt.Fprintf(w, "%d workspace(s), %s (%d mounted); data root %s: %s, on a disk with %s free of %s\n",
		u.Workspaces, units.FormatBytes(u.WorkspaceBytes), u.Mounted, u.Root, units.FormatBytes(u.Bytes), units.FormatBytes(u.FSAvail), units.FormatBytes(u.FSSize))
}
