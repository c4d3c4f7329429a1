package main

import (
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"text/tabwriter"
	"time"

	"github.com/agentbox/agentbox/assistant"
	"github.com/agentbox/agentbox/internal/units"
	"github.com/agentbox/agentbox/sandbox"
)

const workspacesUsage = `usage: agentbox workspaces list  [--app DIR | --data DIR] [--json]
       agentbox workspaces mount [--app DIR | --data DIR] [--user U] --chat C [-- COMMAND...]
       agentbox workspaces prune [--app DIR | --data DIR] [--older-than 7d] [--dry-run] [--json]

Chat workspaces: the folder each chat's agent works in, under the app's
data root (data_root in app.jsonc). list shows them with their size, disk
limit, last use and whether they are in use or mounted; mount makes one's
files readable on the host; prune removes those unused for the retention
period.
`

func runWorkspaces(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	return dispatchSub("workspaces", workspacesUsage, []subcommand{
		{name: "list", aliases: []string{"ls"}, run: func(args []string) int { return runWorkspacesList(ctx, args, stdout, stderr) }},
		{name: "mount", run: func(args []string) int { return runWorkspacesMount(ctx, args, stdout, stderr) }},
		{name: "prune", run: func(args []string) int { return runWorkspacesPrune(ctx, args, stdout, stderr) }},
	}, args, stdout, stderr)
}

// dataRootFlags add --app and --data, the two ways workspaces commands
// find a data root.
func dataRootFlags(fl *flags) (appDir, dataDir *string) {
	appDir = fl.String("app", "", "the app folder `DIR`, whose app.jsonc gives data_root (default: the current folder)")
	dataDir = fl.String("data", "", "the data root `DIR` holding workspaces/ (instead of --app)")
	return appDir, dataDir
}

// dataRoot returns the data root --app or --data name (the app in the
// current folder when neither does), and the app when one was loaded.
func dataRoot(appDir, dataDir string) (string, *assistant.App, error) {
	if dataDir != "" {
		return dataDir, nil, nil
	}
	app, err := loadApp(cmp.Or(appDir, "."))
	if err != nil {
		return "", nil, err
	}
	return app.Config.DataRoot, app, nil
}

const workspacesPruneUsage = `usage: agentbox workspaces prune [--app DIR | --data DIR] [--older-than 7d] [--dry-run] [--json]

Removes chat workspaces not used within the retention period, never one in
use by a running request, and lists what was (or would be) removed.
`

func runWorkspacesPrune(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	fl := newFlags("workspaces prune", workspacesPruneUsage, stdout, stderr)
	appDir, dataDir := dataRootFlags(fl)
	olderThan := fl.String("older-than", "", `remove workspaces unused for this long: "7d", "36h", "1d12h" (default: the app's cleanup.retention, else 7d)`)
	dryRun := fl.Bool("dry-run", false, "only report what would be removed")
	asJSON := fl.Bool("json", false, "print the report as JSON")
	args, code, ok := fl.parse(args)
	if !ok {
		return code
	}
	if len(args) > 0 {
		return fl.usageError("unexpected argument %q", args[0])
	}
	retention := sandbox.DefaultRetention
	if *appDir != "" && *dataDir != "" {
		return fl.usageError("give --app DIR or --data DIR, not both")
	}
	root, app, err := dataRoot(*appDir, *dataDir)
	if err != nil {
		fmt.Fprintf(stderr, "agentbox workspaces prune: %v\n", err)
		return 1
	}
	if app != nil && app.Config.Cleanup.Retention > 0 {
		retention = app.Config.Cleanup.Retention
	}
	if *olderThan != "" {
		d, err := parseAge(*olderThan)
		if err != nil {
			return fl.usageError("--older-than: %v", err)
		}
		retention = d
	}
	if st, err := os.Stat(root); err != nil || !st.IsDir() {
		fmt.Fprintf(stderr, "agentbox workspaces prune: data root %s is not a folder (no chat has run yet, or --data names another folder)\n", root)
		return 1
	}
	if _, err := os.Stat(filepath.Join(root, "workspaces")); errors.Is(err, os.ErrNotExist) {
		fmt.Fprintf(stdout, "no workspaces under %s\n", root)
		return 0
	}
	uid, gid := sandboxOwner() // the folders keep their owner and mode
	wss, err := sandbox.NewWorkspaces(root, uid, gid)
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

// newWorkspaces manages the workspaces of dataRoot for serve, run and the
// commands that open a chat's workspace, with disk limits as this host
// allows (sandbox.DetectDiskMode, said in the log), or measured, not
// loop-mounted, when noLoop says why they must not be. keep is how long
// an image stays mounted after its last release
// (WorkspacesOptions.KeepMounted). It cleans nothing: recoverDisks does,
// once the runtimes are up.
func newWorkspaces(ctx context.Context, dataRoot string, uid, gid int, noLoop string, keep time.Duration, log *slog.Logger) (*sandbox.Workspaces, error) {
	mode, why := sandbox.DiskWatch, noLoop
	if noLoop == "" {
		mode, why = sandbox.DetectDiskMode(ctx, dataRoot)
	}
	if mode == sandbox.DiskLoop {
		log.Debug("workspace disk limits: loop-mounted ext4 images (sandbox.max_disk)")
	} else {
		log.Warn("workspace disk limits are measured, not a filesystem's: a workspace that grows past sandbox.max_disk has its sandbox stopped and what it wrote past the limit deleted", "reason", why)
	}
	return sandbox.NewWorkspacesWith(dataRoot, sandbox.WorkspacesOptions{UID: uid, GID: gid, Disk: mode, KeepMounted: keep, Logger: log})
}

const workspacesListUsage = `usage: agentbox workspaces list [--app DIR | --data DIR] [--json]

Lists the chat workspaces with what each takes on disk, its disk limit
(sandbox.max_disk, for a workspace that is a disk image), its last use and
whether a request uses it, then the data root's total, the free space of
the disk holding it, and the images mounted and loop devices attached. It
only looks: nothing is mounted, locked or changed.
`

// workspacesList is the JSON answer of `workspaces list --json`.
type workspacesList struct {
	Workspaces []sandbox.WorkspaceInfo `json:"workspaces"`
	Usage      *sandbox.DataUsage      `json:"usage"`
}

func runWorkspacesList(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	fl := newFlags("workspaces list", workspacesListUsage, stdout, stderr)
	appDir, dataDir := dataRootFlags(fl)
	asJSON := fl.Bool("json", false, "print the list as JSON")
	args, code, ok := fl.parse(args)
	if !ok {
		return code
	}
	if len(args) > 0 {
		return fl.usageError("unexpected argument %q", args[0])
	}
	if *appDir != "" && *dataDir != "" {
		return fl.usageError("give --app DIR or --data DIR, not both")
	}
	root, _, err := dataRoot(*appDir, *dataDir)
	if err != nil {
		fmt.Fprintf(stderr, "agentbox workspaces list: %v\n", err)
		return 1
	}
	if st, err := os.Stat(root); err != nil || !st.IsDir() {
		fmt.Fprintf(stdout, "no workspaces: the data root %s does not exist yet (a chat's first sandboxed turn makes it)\n", root)
		return 0
	}
	if _, err := os.Stat(filepath.Join(root, "workspaces")); errors.Is(err, os.ErrNotExist) {
		fmt.Fprintf(stdout, "no workspaces under %s\n", root)
		return 0
	}
	uid, gid := sandboxOwner() // the folders keep their owner and mode
	wss, err := sandbox.NewWorkspaces(root, uid, gid)
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
	fmt.Fprintf(w, "%d workspace(s), %s (%d mounted, %s); data root %s: %s, on a disk with %s free of %s\n",
		u.Workspaces, units.FormatBytes(u.WorkspaceBytes), u.Mounted, plural(u.LoopDevices, "loop device"), u.Root, units.FormatBytes(u.Bytes), units.FormatBytes(u.FSAvail), units.FormatBytes(u.FSSize))
}

const workspacesMountUsage = `usage: agentbox workspaces mount [--app DIR | --data DIR] [--user U] --chat C [-- COMMAND...]

Makes the files of a chat's workspace readable on the host. A workspace
with a disk limit (sandbox.max_disk, 10g by default) is an ext4 image,
mounted at its folder only while something uses it: mount mounts it and
keeps it mounted until Ctrl-C, or runs COMMAND in the folder and unmounts
it when COMMAND exits (the exit status is COMMAND's). A workspace that is
a plain folder is shown as it is. Meanwhile the workspace counts as in use:
no prune removes it.

The files belong to the sandbox user (uid 1000): root and that user can
read them. To run the agent's tools on them, as the agent would, use
agentbox shell; the web app (agentbox serve) shows them too.

  agentbox workspaces mount --chat C -- ls -la
  agentbox workspaces mount --chat C -- cat hello.sh
`

func runWorkspacesMount(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	fl := newFlags("workspaces mount", workspacesMountUsage, stdout, stderr)
	appDir, dataDir := dataRootFlags(fl)
	user := fl.String("user", "cli", "the user whose chat it is")
	chatID := fl.String("chat", "", "the chat (required; agentbox workspaces list lists them)")
	command, code, ok := fl.parse(args)
	if !ok {
		return code
	}
	if *chatID == "" {
		return fl.usageError("--chat is required (agentbox workspaces list lists the chats)")
	}
	if *appDir != "" && *dataDir != "" {
		return fl.usageError("give --app DIR or --data DIR, not both")
	}
	for _, c := range []struct{ kind, v string }{{"user", *user}, {"chat", *chatID}} {
		if err := sandbox.ValidateID(c.kind, c.v); err != nil {
			return fl.usageError("--%s: %v", c.kind, err)
		}
	}
	fail := func(err error) int {
		fmt.Fprintf(stderr, "agentbox workspaces mount: %v\n", err)
		return 1
	}
	root, app, err := dataRoot(*appDir, *dataDir)
	if err != nil {
		return fail(err)
	}
	noLoop := ""
	if app != nil && app.Config.Sandbox.Kubernetes.WorkspaceClaim != "" {
		noLoop = "the workspaces are on a PersistentVolumeClaim"
	}
	if _, err := os.Stat(filepath.Join(root, "workspaces")); err != nil {
		return fail(fmt.Errorf("no workspaces under %s yet: a chat's first sandboxed turn makes its workspace", root))
	}
	uid, gid := sandboxOwner()
	wss, err := newWorkspaces(ctx, root, uid, gid, noLoop, 0, cliLogger(stderr, false))
	if err != nil {
		return fail(err)
	}
	defer wss.Close(context.WithoutCancel(ctx))
	if !wss.Exists(*user, *chatID) {
		return fail(noWorkspace(ctx, wss, *user, *chatID))
	}
	ws, release, err := wss.Acquire(ctx, *user, *chatID)
	if err != nil {
		return fail(err)
	}
	defer release()
	dir := ws.Dir()
	mounted := ws.Disk().Mode == sandbox.DiskLoop
	if len(command) == 0 {
		if mounted {
			fmt.Fprintf(stdout, "The files of %s/%s are at %s until you press Ctrl-C.\n", *user, *chatID, dir)
		} else {
			fmt.Fprintf(stdout, "The files of %s/%s are at %s (a plain folder, not an image).\n", *user, *chatID, dir)
			return 0
		}
		<-ctx.Done()
		fmt.Fprintf(stdout, "Unmounted %s.\n", dir)
		return 0
	}
	cmd := exec.CommandContext(ctx, command[0], command[1:]...)
	cmd.Dir, cmd.Stdin, cmd.Stdout, cmd.Stderr = dir, os.Stdin, stdout, stderr
	// SIGTERM, not a kill, when agentbox is told to stop (Ctrl-C reaches
	// the command itself, in the terminal's process group).
	cmd.Cancel = func() error { return cmd.Process.Signal(syscall.SIGTERM) }
	cmd.WaitDelay = 10 * time.Second
	err = cmd.Run()
	var ee *exec.ExitError
	switch {
	case err == nil:
		return 0
	case errors.As(err, &ee) && ee.ExitCode() >= 0:
		return ee.ExitCode()
	default:
		return fail(err)
	}
}

// noWorkspace says that (user, chat) has no workspace, with the chat it
// was likely meant to be and where to find the chats.
func noWorkspace(ctx context.Context, wss *sandbox.Workspaces, user, chat string) error {
	list, _ := wss.List(ctx)
	var chats []string
	for _, w := range list {
		if w.User == user {
			chats = append(chats, w.Chat)
		}
	}
	msg := fmt.Sprintf("chat %s of user %s has no workspace", chat, user)
	switch c := closestName(chat, chats); {
	case len(list) == 0:
		return errors.New(msg + ": there are none yet (a chat's first sandboxed turn makes its workspace)")
	case len(chats) == 0:
		return errors.New(msg + ": that user has none (--user names another; `agentbox workspaces list` lists them)")
	case c != "":
		return fmt.Errorf("%s (did you mean %q?): `agentbox workspaces list` lists them", msg, c)
	}
	return errors.New(msg + ": `agentbox workspaces list` lists them")
}
