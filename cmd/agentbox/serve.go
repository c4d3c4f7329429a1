package main

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"log/slog"
	"maps"
	"net"
	"net/url"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"slices"
	"sort"
	"strings"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	corev1 "k8s.io/api/core/v1"

	"github.com/agentbox/agentbox/assistant"
	"github.com/agentbox/agentbox/breaker"
	"github.com/agentbox/agentbox/bridge"
	"github.com/agentbox/agentbox/checkpoint"
	"github.com/agentbox/agentbox/internal/telemetry"
	"github.com/agentbox/agentbox/pipeline"
	"github.com/agentbox/agentbox/preview"
	"github.com/agentbox/agentbox/sandbox"
	"github.com/agentbox/agentbox/sandbox/docker"
	"github.com/agentbox/agentbox/sandbox/kubernetes"
	"github.com/agentbox/agentbox/sandbox/runtimes"
	"github.com/agentbox/agentbox/server"
	"github.com/agentbox/agentbox/store"
	"github.com/agentbox/agentbox/testrun"
)

const serveUsage = `usage: agentbox serve [--app DIR] [--addr ADDR] [--drain-timeout D]

Serves the chat API of an app folder: the OpenAI-compatible
/v1/chat/completions, the native event stream /api/assistants/{id}/chat,
assistant listings, chats, workspace files and terminals, Prometheus
metrics, and the web app at / (open http://ADDR/ in a browser). The app is
reloaded when its files change. Bearer tokens come from auth.tokens in
app.jsonc; without them the server only listens on a loopback address
(development mode).

SIGTERM or Ctrl-C stops accepting and lets running chats finish for the
drain timeout (drain_timeout in app.jsonc, default 30s); then it cancels
them, removes their sandboxes and exits. A second SIGTERM or Ctrl-C skips
the rest of the drain: chats are canceled and cleaned up at once.

At start it removes what a crashed server left: sandbox containers, bridge
socket folders and run files in idle workspaces, never those of a server
that still runs.
`

// appReloadInterval is how often serve checks the app folder for changes.
const appReloadInterval = 2 * time.Second

func runServe(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	fl := newFlags("serve", serveUsage, stdout, stderr)
	appDir := fl.appFlag()
	addr := fl.String("addr", "", "the listen address (default: listen in app.jsonc, else "+server.DefaultAddr+")")
	runtimeName := fl.String("runtime", "", "sandbox runtime when the app names none: docker, kubernetes or local (default: docker when an engine answers, else local)")
	kubeconfig := fl.String("kubeconfig", "", "kubeconfig of the kubernetes runtime (default: sandbox.kubernetes.kubeconfig in app.jsonc, else $KUBECONFIG, the in-cluster service account, ~/.kube/config)")
	drain := fl.Duration("drain-timeout", 0, "how long SIGTERM lets running chats finish before canceling them (default: drain_timeout in app.jsonc, else 30s)")
	args, code, ok := fl.parse(args)
	if !ok {
		return code
	}
	if len(args) > 0 {
		return fl.usageError("unexpected argument %q (the app folder goes in --app)", args[0])
	}
	if *drain < 0 {
		fmt.Fprintf(stderr, "agentbox serve: --drain-timeout %s is negative\n", *drain)
		return 2
	}
	logger := slog.New(slog.NewTextHandler(stderr, &slog.HandlerOptions{Level: slog.LevelInfo}))
	// A second SIGTERM or Ctrl-C (the first ends ctx) ends the drain at once.
	sigs := make(chan os.Signal, 4)
	signal.Notify(sigs, os.Interrupt, syscall.SIGTERM)
	defer signal.Stop(sigs)

	reg := prometheus.NewRegistry()
	reg.MustRegister(collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	env, err := openEnv(ctx, envOptions{AppDir: *appDir, Logger: logger, Serve: true, Runtime: *runtimeName, Kubeconfig: *kubeconfig, Metrics: reg})
	if err != nil {
		fmt.Fprintf(stderr, "agentbox serve: %v\n", err)
		return 1
	}
	app := env.Live.Current()
	listen := *addr
	if listen == "" {
		listen = app.Config.Listen
	}
	drainTimeout := cmp.Or(*drain, app.Config.DrainTimeout, assistant.DefaultDrainTimeout)
	tokens, teams, err := app.Config.ResolveIdentities()
	var metricsToken string
	if err == nil {
		metricsToken, err = app.Config.ResolveMetricsToken()
	}
	// Test runs the web app starts run as their users' turns do; they end
	// before the pipeline closes.
	tests := testrun.NewService(env.Pipeline, pipeline.StoreMemory(env.Store), version, logger)
	if err == nil {
		var srv *server.Server
		srv, err = server.New(server.Config{Backend: env.Pipeline, Chats: env.Pipeline, Tokens: tokens, Teams: teams, Addr: listen, Logger: logger,
			AllowedHosts: app.Config.AllowedHosts, AllowedOrigins: app.Config.AllowedOrigins,
			DrainTimeout: drainTimeout, Metrics: reg, MetricsToken: metricsToken, Responses: env.Store, Tests: tests,
			Previews: env.Previews})
		var ln net.Listener
		if err == nil {
			ln, err = (&net.ListenConfig{}).Listen(ctx, "tcp", listen)
			if err != nil {
				err = fmt.Errorf("listen on %s: %w (another server may use it: --addr picks another address)", listen, err)
			}
		}
		if err == nil {
			env.Previews.SetOrigin(&url.URL{Scheme: "http", Host: ln.Addr().String()})
			printServing(stdout, app.Root, app, env.Unavailable, ln.Addr().String(), len(tokens) > 0)
			stopped := make(chan struct{})
			go abortOnSecondSignal(sigs, srv, stopped, logger)
			err = srv.Serve(ctx, ln)
			close(stopped)
		}
	}
	tctx, tcancel := context.WithTimeout(context.WithoutCancel(ctx), 30*time.Second)
	if cerr := tests.Close(tctx); cerr != nil {
		logger.Error("shutdown: test runs", "err", cerr)
	}
	tcancel()
	// The server drained or canceled its requests. A turn still running
	// now is stuck where cancellation does not reach: the pipeline cancels
	// it and removes its sandbox itself, without waiting for it.
	expired, cancelNow := context.WithCancel(context.Background())
	cancelNow()
	if cerr := env.Pipeline.Close(expired); cerr != nil && !errors.Is(cerr, context.Canceled) {
		logger.Error("shutdown", "err", cerr)
	}
	cctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 30*time.Second)
	defer cancel()
	if cerr := env.Close(cctx); cerr != nil {
		logger.Error("shutdown", "err", cerr)
	}
	if err != nil {
		fmt.Fprintf(stderr, "agentbox serve: %v\n", err)
		return 1
	}
	return 0
}

// printServing tells the person who started the server where to go: the
// URL of the web app and the API, and the assistants it serves, with those
// that will fail and why.
func printServing(w io.Writer, appDir string, app *assistant.App, unavailable map[string]string, addr string, auth bool) {
	host, port, err := net.SplitHostPort(addr)
	if ip := net.ParseIP(host); err == nil && (ip == nil || ip.IsUnspecified()) {
		host = "127.0.0.1" // every interface: this host's loopback is one
	}
	base := "http://" + net.JoinHostPort(host, port)
	ids := assistantIDs(app)
	fmt.Fprintf(w, "agentbox is serving %s: %s (%s)\n", appDir, plural(len(ids), "assistant"), strings.Join(ids, ", "))
	for _, id := range ids {
		if why, ok := unavailable[id]; ok {
			fmt.Fprintf(w, "  %s will fail until this is fixed: %s\n", id, why)
		}
	}
	if len(app.Failed) > 0 {
		fmt.Fprintf(w, "%s did not load (`agentbox check` lists every problem; fixed files are reloaded):\n", plural(len(app.Failed), "assistant"))
		for _, id := range slices.Sorted(maps.Keys(app.Failed)) {
			fmt.Fprintf(w, "  %s\n", app.Failed[id].Error())
		}
	}
	fmt.Fprintf(w, "Open %s/ in a browser for the web app; the API is at %s/v1/chat/completions (OpenAI) and %s/api/assistants/ID/chat.\n", base, base, base)
	if auth {
		fmt.Fprintln(w, "Requests need a bearer token (auth.tokens in app.jsonc).")
	}
	fmt.Fprintln(w, "Ctrl-C stops it.")
}

// abortOnSecondSignal ends srv's drain at the second SIGTERM or Ctrl-C
// (the first one ended ctx and started the drain). It returns when the
// server stopped.
func abortOnSecondSignal(sigs <-chan os.Signal, srv *server.Server, stopped <-chan struct{}, logger *slog.Logger) {
	for n := 0; ; {
		select {
		case <-sigs:
			if n++; n == 2 {
				logger.Warn("second signal: canceling running chats now")
				srv.Abort()
				return
			}
		case <-stopped:
			return
		}
	}
}

// sandboxOwner is who owns workspace folders: the sandbox user
// (1000:1000 in the sandbox images) when this process can chown, else
// -1, -1 (this process's user).
func sandboxOwner() (uid, gid int) {
	if os.Geteuid() == 0 {
		return 1000, 1000
	}
	return -1, -1
}

// envOptions say what openEnv builds.
type envOptions struct {
	AppDir string
	Logger *slog.Logger
	// Serve: watch the app for changes, start the workspace retention job
	// and the container reaper, and set up every runtime the app uses
	// (a missing engine is a warning). Otherwise only what Assistant needs
	// is set up, and a missing engine is an error.
	Serve     bool
	Assistant string
	// Runtime is the sandbox runtime for assistants and apps that name
	// none ("" = docker when an engine answers, else local).
	Runtime string
	// Kubeconfig overrides app.jsonc's sandbox.kubernetes.kubeconfig.
	Kubeconfig string
	// Metrics, when set, gets the pipeline's metrics and the connectors'
	// circuit breakers.
	Metrics *prometheus.Registry
	// Only, when set, limits the runtimes set up to those of these
	// assistants (agentbox test: the tested ones, their judges and
	// simulators).
	Only []string
	// WrapApp, when set, wraps the app the pipeline sees (agentbox test
	// lets the assistants take the connectors a run chooses).
	WrapApp func(pipeline.AppSource) pipeline.AppSource
	// Previews, when set, configures the previews of sandbox ports instead
	// of app.jsonc's preview_domain (agentbox run serves them itself, on
	// loopback).
	Previews *preview.Config
}

// loadApp loads the app folder dir once (no hooks compiled, nothing
// started), for commands that only read its settings.
func loadApp(dir string) (*assistant.App, error) {
	if err := isApp(dir); err != nil {
		return nil, err
	}
	app, err := assistant.Load(dir)
	if err != nil {
		return nil, fmt.Errorf("load app (run `agentbox check --app %s` for every problem): %w", dir, err)
	}
	return app, nil
}

// isApp says, with what to do instead, when dir is not an app folder at
// all: missing, or with neither assistants/ nor connectors/ nor app.jsonc
// (a command run in the wrong folder).
func isApp(dir string) error {
	st, err := os.Stat(dir)
	switch {
	case errors.Is(err, fs.ErrNotExist):
		return fmt.Errorf("app folder %s does not exist: create an app there with `agentbox init %s`, or name one with --app DIR", dir, dir)
	case err != nil:
		return fmt.Errorf("app folder: %w", err)
	case !st.IsDir():
		return fmt.Errorf("app folder %s is not a folder: name an app's folder with --app DIR", dir)
	}
	for _, name := range []string{assistant.AssistantsDir, "connectors", "app.jsonc"} {
		if _, err := os.Stat(filepath.Join(dir, name)); err == nil {
			return nil
		}
	}
	where := dir
	if dir == "." {
		where = "the current folder"
	}
	return fmt.Errorf("%s is not an app folder (it has no assistants/ folder): name one with --app DIR, or create one with `agentbox init`", where)
}

// appEnv is everything a pipeline runs on: the (live) app, the store,
// workspaces and sandbox runtimes. Close releases it all.
type appEnv struct {
	Live     *assistant.Live
	Pipeline *pipeline.Pipeline
	// Store is the SQLite store under the data root (history, memory,
	// usage, stored responses).
	Store *store.Store
	// Previews serves the sandboxes' declared ports (package preview).
	Previews *preview.Manager
	// Unavailable says, by assistant id, why an assistant of the app as
	// loaded will fail until something changes (serve; run and shell fail
	// to open instead): its sandbox runtime or CLI is missing.
	Unavailable map[string]string
	closers     []func(context.Context) error
}

// openEnv loads the app and builds the pipeline with persistent history,
// hook memory, usage and chat locks (app.jsonc's store: SQLite under the
// data root by default), the chat workspaces, and the sandbox runtimes.
func openEnv(ctx context.Context, opts envOptions) (_ *appEnv, err error) {
	env := &appEnv{}
	defer func() {
		if err != nil {
			env.Close(context.WithoutCancel(ctx))
		}
	}()
	if err := isApp(opts.AppDir); err != nil {
		return nil, err
	}
	dir, err := filepath.Abs(opts.AppDir)
	if err != nil {
		return nil, fmt.Errorf("app folder: %w", err)
	}
	// An assistant of a (re)loaded app serves only when its hooks compile;
	// the pipeline then uses the same compiled hooks.
	hooks := &pipeline.HookCache{}
	// A reload stops the kept chats of changed assistants at once.
	var reloaded atomic.Pointer[pipeline.Pipeline]
	live, err := assistant.NewLive(dir, opts.Logger, assistant.WithNotify(func(app *assistant.App) {
		if p := reloaded.Load(); p != nil {
			p.AppReloaded(app)
		}
	}), assistant.WithCheck(func(app *assistant.App, a *assistant.Assistant) []assistant.Problem {
		return hookProblems(dir, a, func(a *assistant.Assistant) error { return checkHooks(a, hooks.Scripts(app).Hooks) })
	}))
	if err != nil {
		return nil, fmt.Errorf("load app (run `agentbox check --app %s` for every problem): %w", opts.AppDir, err)
	}
	env.Live = live
	env.closers = append(env.closers, live.Close)
	// Traces go where the standard OTEL_* variables say (nowhere unless
	// they name an exporter); closed last, after the pipeline's turns.
	stopTraces, err := telemetry.Setup(ctx, "agentbox", version)
	if err != nil {
		return nil, err
	}
	env.closers = append([]func(context.Context) error{stopTraces}, env.closers...)
	app := live.Current()
	if opts.Assistant != "" {
		if f := app.Failed[opts.Assistant]; f != nil && !f.Serving() {
			return nil, f
		}
		if _, ok := app.Assistants[opts.Assistant]; !ok {
			return nil, unknownAssistant(app, opts.Assistant)
		}
	}
	if opts.Serve {
		live.Watch(ctx, appReloadInterval)
	}

	dataRoot := app.Config.DataRoot
	uid, gid := sandboxOwner()
	// Workspaces first: they create the data root passable by the
	// sandbox user's group (0710), which the local runtime's sandbox user
	// needs; the store would create it 0700.
	noLoop := ""
	if app.Config.Sandbox.Kubernetes.WorkspaceClaim != "" {
		noLoop = "workspaces are on a PersistentVolumeClaim that sandbox pods on other nodes mount, which a loop mount on this host would not reach"
	}
	// A workspace image is mounted while a turn or terminal uses it; a
	// server keeps it mounted a while after, for the chat's next turn (its
	// Close unmounts what it keeps), a one-shot command gives it back at
	// once.
	keep := time.Duration(0)
	if opts.Serve {
		keep = sandbox.DefaultKeepMounted
	}
	ws, err := newWorkspaces(ctx, dataRoot, uid, gid, noLoop, keep, opts.Logger)
	if err != nil {
		return nil, err
	}
	env.closers = append(env.closers, ws.Close)
	if opts.Serve && opts.Metrics != nil {
		um, err := startUsageMetrics(ctx, opts.Metrics, ws, usageInterval, opts.Logger)
		if err != nil {
			return nil, err
		}
		env.closers = append(env.closers, um.Close)
	}
	storeCfg, err := app.Config.ResolveStore()
	if err != nil {
		return nil, err
	}
	st, err := store.OpenConfig(ctx, storeCfg)
	if err != nil {
		return nil, err
	}
	env.closers = append(env.closers, func(context.Context) error { return st.Close() })
	env.Store = st
	opts.Logger.Info("store", "database", st.String(), "shared_chat_locks", st.SharedLocks())

	// The chats' checkpoints live beside their workspaces.
	cps, err := checkpoint.Open(filepath.Join(dataRoot, "checkpoints"), checkpoint.Options{Logger: opts.Logger})
	if err != nil {
		return nil, err
	}

	rts, def, err := env.openRuntimes(ctx, app, opts)
	if err != nil {
		return nil, err
	}
	recoverDisks(ctx, rts, ws, opts.Logger)
	if opts.Serve {
		ret, err := sandbox.NewRetention(ws, app.Config.Cleanup.Schedule, app.Config.Cleanup.Retention, opts.Logger)
		if err != nil {
			return nil, err
		}
		ret.Start()
		env.closers = append(env.closers, ret.Close)
	}

	bridgeCfg := &pipeline.BridgeConfig{}
	if exe, err := os.Executable(); err == nil {
		// The sandbox runs this very binary as its MCP server and model
		// proxy (`agentbox bridge`), mounted read-only.
		bridgeCfg.Binary = exe
	}
	if rts[kubernetes.Name] != nil && app.Config.Sandbox.Kubernetes.BridgeListen != "" {
		gw, err := openGateway(app.Config, opts.Logger)
		if err != nil {
			return nil, err
		}
		env.closers = append(env.closers, func(context.Context) error { return gw.Close() })
		bridgeCfg.Gateways = map[string]*bridge.Gateway{kubernetes.Name: gw}
	}
	var metrics *pipeline.Metrics
	breakers := breaker.NewSet(breaker.Settings{Failures: app.Config.Limits.Breaker.Failures, Cooldown: app.Config.Limits.Breaker.Cooldown}, opts.Logger)
	if opts.Metrics != nil {
		if metrics, err = pipeline.NewMetrics(opts.Metrics); err != nil {
			return nil, err
		}
		if err := opts.Metrics.Register(breakers); err != nil {
			return nil, err
		}
	}
	var src pipeline.AppSource = live
	if opts.WrapApp != nil {
		src = opts.WrapApp(live)
	}
	mounts := localMounts(opts.Logger)
	env.Unavailable = map[string]string{}
	for _, id := range assistantIDs(app) {
		a := app.Assistants[id]
		if a.Sandbox == nil || opts.Assistant != "" && id != opts.Assistant || opts.Only != nil && !slices.Contains(opts.Only, id) {
			continue
		}
		var err error
		switch name := cmp.Or(a.Sandbox.Runtime, app.Config.Sandbox.Runtime, def); {
		case rts[name] == nil:
			err = fmt.Errorf("its sandbox runtime %s is not available (the log says why)", cmp.Or(name, "docker"))
		case name == "local":
			err = checkLocalCLI(a, mounts["local"])
		}
		if err == nil {
			continue
		}
		if !opts.Serve {
			return nil, err
		}
		opts.Logger.Warn("assistant will fail until this is fixed", "assistant", id, "err", err)
		env.Unavailable[id] = err.Error()
	}
	pcfg := preview.Config{Domain: app.Config.PreviewDomain}
	if opts.Previews != nil {
		pcfg = *opts.Previews
	}
	if env.Previews, err = preview.New(pcfg); err != nil {
		return nil, err
	}
	p, err := pipeline.New(pipeline.Config{
		Previews:       env.Previews,
		Metrics:        metrics,
		Breakers:       breakers,
		App:            src,
		Runtimes:       rts,
		DefaultRuntime: def,
		RuntimeMounts:  mounts,
		Bridge:         bridgeCfg,
		Hooks:          hooks,
		Workspaces:     ws,
		Checkpoints:    cps,
		History:        st,
		Approvals:      st,
		Memory:         pipeline.StoreMemory(st),
		Usage:          st,
		ChatLocks:      pipeline.StoreChatLocks(st),
		Skills:         st,
		Logger:         opts.Logger,
	})
	if err != nil {
		return nil, err
	}
	env.Pipeline = p
	reloaded.Store(p)
	// Closed first (closers run in reverse): running turns end before the
	// runtimes and the store go away.
	env.closers = append(env.closers, p.Close)
	if opts.Serve {
		cleanLeftovers(ctx, bridgeCfg.Dir, ws, p.RunFiles(), opts.Logger)
		// The assistants with sandbox.pool get their sandboxes made ahead
		// of their new chats (a one-turn run has none to wait for).
		p.StartPool()
		for _, gw := range bridgeCfg.Gateways {
			if gw.Dir() != "" {
				// On the claim: what this host's dead servers left there.
				if _, err := bridge.CleanStale(gw.Dir(), 0, opts.Logger); err != nil {
					opts.Logger.Warn("crash leftovers: bridge folders on the claim", "err", err)
				}
			}
		}
	}
	return env, nil
}

// recoverDisks gives back what processes that died (a crashed server, a
// killed `agentbox run`) left of workspace disks on this host, before
// this process's first turn: their sandbox containers first, since a
// container's mount namespace holds its workspace's image and loop
// device, then the images they left mounted and the loop devices behind
// them. Only containers whose process is gone are removed here (a
// server's reaper takes the rest after its grace period). Failures are
// logged.
func recoverDisks(ctx context.Context, rts map[string]sandbox.Runtime, ws *sandbox.Workspaces, logger *slog.Logger) {
	if d, ok := rts[docker.Name].(*docker.Runtime); ok && ws.DiskMode() == sandbox.DiskLoop {
		rctx, cancel := context.WithTimeout(ctx, 30*time.Second)
		if _, err := d.Reap(rctx, docker.ReapOptions{Grace: 100 * 365 * 24 * time.Hour}); err != nil {
			logger.Warn("crash leftovers: sandbox containers of processes that are gone", "err", err)
		}
		cancel()
	}
	rep, err := ws.Recover(ctx)
	if err != nil {
		logger.Warn("workspace disks left by a crash not all cleaned", "error", err)
	}
	if rep != nil && len(rep.Unmounted)+len(rep.Detached)+len(rep.Removed) > 0 {
		logger.Info("cleaned workspace disks a crash left", "unmounted", rep.Unmounted, "detached", rep.Detached, "removed", rep.Removed)
	}
}

// cleanLeftovers removes what a crashed server (or a killed `agentbox
// run`) left on this host besides its containers, which the runtime's
// reaper removes: bridge socket folders of processes that are gone, and
// run files (prompt files, half-written temporary files) in workspaces no
// process uses. What a live process owns is spared. Failures are logged:
// they do not stop the server.
func cleanLeftovers(ctx context.Context, bridgeDir string, ws *sandbox.Workspaces, runFiles []string, logger *slog.Logger) {
	start := time.Now()
	dirs, err := bridge.CleanStale(bridgeDir, 0, logger)
	if err != nil {
		logger.Warn("crash leftovers: bridge folders", "err", err)
	}
	n, err := ws.CleanRunFiles(ctx, runFiles)
	if err != nil {
		logger.Warn("crash leftovers: workspace run files", "err", err)
	}
	if len(dirs) > 0 || n > 0 {
		logger.Info("crash leftovers removed", "bridge_folders", len(dirs), "workspace_files", n, "duration", time.Since(start))
	}
}

// openRuntimes sets up the sandbox runtimes the app's sandboxed
// assistants name. "" (no runtime named anywhere) means docker when an
// engine answers, else local, and says which.
func (env *appEnv) openRuntimes(ctx context.Context, app *assistant.App, opts envOptions) (map[string]sandbox.Runtime, string, error) {
	want := map[string]bool{}
	for id, a := range app.Assistants {
		if a.Sandbox == nil || opts.Assistant != "" && id != opts.Assistant || opts.Only != nil && !slices.Contains(opts.Only, id) {
			continue
		}
		name := cmp.Or(a.Sandbox.Runtime, app.Config.Sandbox.Runtime, opts.Runtime)
		want[name] = true
	}
	if opts.Serve && app.Config.Sandbox.Runtime == "" {
		want[opts.Runtime] = true // a reload may add sandboxed assistants
	}
	rts := map[string]sandbox.Runtime{}
	def := cmp.Or(app.Config.Sandbox.Runtime, opts.Runtime)
	names := make([]string, 0, len(want))
	for n := range want {
		names = append(names, n)
	}
	sort.Strings(names)
	for _, name := range names {
		rt, err := env.openRuntime(ctx, app, name, opts)
		if err != nil {
			if opts.Serve {
				opts.Logger.Warn("sandbox runtime unavailable: sandboxed assistants will fail until it is", "runtime", name, "err", err)
				continue
			}
			return nil, "", err
		}
		rts[rt.Name()] = rt
		if name == "" {
			def = rt.Name()
		}
	}
	if len(rts) == 0 {
		return nil, "", nil
	}
	if _, ok := rts[def]; !ok {
		def = ""
		for n := range rts {
			def = n
			break
		}
	}
	return rts, def, nil
}

func (env *appEnv) openRuntime(ctx context.Context, app *assistant.App, name string, opts envOptions) (sandbox.Runtime, error) {
	logger := opts.Logger
	auto := name == ""
	if auto {
		name = "docker"
	}
	var ro runtimes.Options
	if !opts.Serve {
		// A one-shot run is its own instance: a server's reaper on this
		// host (instance = host name) then leaves its sandbox alone for
		// the reaper's grace period instead of taking it for a leftover of
		// its own earlier run.
		inst := fmt.Sprintf("agentbox-run-%d", os.Getpid())
		ro.Docker.Instance, ro.Local.Instance = inst, inst
	}
	ro.Docker.Logger = logger
	ro.Kubernetes = kubernetesOptions(app.Config, opts.Kubeconfig)
	ro.Kubernetes.Instance, ro.Kubernetes.Logger = ro.Docker.Instance, logger
	cctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	rt, err := runtimes.New(cctx, name, ro)
	cancel()
	if err != nil && auto && errors.Is(err, sandbox.ErrEngineUnavailable) {
		logger.Warn("no Docker engine answers; using the local runtime (bubblewrap) instead", "docker", err)
		name = "local"
		rt, err = runtimes.New(ctx, name, ro)
	}
	if err != nil {
		return nil, fmt.Errorf("sandbox runtime %s: %w", name, err)
	}
	logger.Info("sandbox runtime ready", "runtime", rt.Name())
	env.closers = append(env.closers, rt.Close)
	if r, ok := rt.(interface{ StartReaper(time.Duration) }); ok && opts.Serve {
		r.StartReaper(0) // orphaned containers: at start, then every minute
	}
	return rt, nil
}

// openGateway starts the bridge gateway of sandbox pods from app.jsonc's
// sandbox.kubernetes.bridge_listen and bridge_address (default: $POD_IP,
// which the Deployment sets, with the listen port). With a workspace claim
// the sessions' files (the agentbox binary the pods run) go on the claim,
// which pods on every node mount.
func openGateway(cfg *assistant.AppConfig, logger *slog.Logger) (*bridge.Gateway, error) {
	k := cfg.Sandbox.Kubernetes
	addr := k.BridgeAddress
	if host, port, err := net.SplitHostPort(k.BridgeListen); err == nil && addr == "" && os.Getenv("POD_IP") != "" {
		if ip := net.ParseIP(host); host == "" || ip != nil && ip.IsUnspecified() {
			addr = net.JoinHostPort(os.Getenv("POD_IP"), port)
		}
	}
	o := bridge.GatewayOptions{Listen: k.BridgeListen, Address: addr, Logger: logger}
	if k.WorkspaceClaim != "" {
		o.Dir = filepath.Join(cmp.Or(k.ClaimRoot, cfg.DataRoot), ".agentbox-bridge", "sessions")
	}
	gw, err := bridge.NewGateway(o)
	if err != nil {
		return nil, fmt.Errorf("sandbox.kubernetes.bridge_listen: %w", err)
	}
	logger.Info("bridge gateway for sandbox pods", "listen", gw.ListenAddr(), "address", gw.Address())
	return gw, nil
}

// kubernetesOptions are the kubernetes runtime's options from app.jsonc's
// sandbox.kubernetes, with kubeconfig (the --kubeconfig flag) over its
// file. The claim's root defaults to the data root, where a server in a
// pod mounts the same volume.
func kubernetesOptions(cfg *assistant.AppConfig, kubeconfig string) kubernetes.Options {
	k := cfg.Sandbox.Kubernetes
	o := kubernetes.Options{
		Kubeconfig:       cmp.Or(kubeconfig, k.Kubeconfig),
		Context:          k.Context,
		Namespace:        k.Namespace,
		ImagePullPolicy:  corev1.PullPolicy(k.ImagePullPolicy),
		AllowHostNetwork: k.AllowHostNetwork,
		RuntimeClasses:   k.RuntimeClasses,
		PoolDir:          k.PoolDir,
	}
	if k.WorkspaceClaim != "" {
		o.Storage = kubernetes.Storage{Claim: k.WorkspaceClaim, ClaimRoot: cmp.Or(k.ClaimRoot, cfg.DataRoot)}
	}
	return o
}

// localCLIs are the coding-agent CLIs the local (bubblewrap) runtime can
// run, by sandbox command: the host's binary (the variable, else the name
// on PATH) is mounted at target, since the image's binaries do not exist
// there.
var localCLIs = []struct{ command, env, name, target, install string }{
	{"claude", "AGENTBOX_CLAUDE_BIN", "claude", "/usr/local/bin/claude", "npm install -g @anthropic-ai/claude-code"},
	{"cursor", "AGENTBOX_CURSOR_BIN", "cursor-agent", "/usr/local/bin/cursor-agent", "see https://cursor.com/cli"},
}

// localMounts makes the host's coding-agent CLIs visible inside local
// sandboxes (localCLIs).
func localMounts(logger *slog.Logger) map[string][]sandbox.Mount {
	var mounts []sandbox.Mount
	for _, c := range localCLIs {
		p := os.Getenv(c.env)
		if p == "" {
			p, _ = exec.LookPath(c.name)
		}
		if p == "" {
			continue
		}
		real, err := filepath.EvalSymlinks(p)
		if err != nil {
			logger.Warn("coding-agent CLI not usable by the local runtime", "cli", c.name, "path", p, "err", err)
			continue
		}
		mounts = append(mounts, sandbox.Mount{Source: real, Target: c.target})
	}
	return map[string][]sandbox.Mount{"local": mounts}
}

// checkLocalCLI says, with what to do, when a's sandbox runs in the local
// runtime and the host has no binary of its CLI for it (mounts, from
// localMounts) — the turn would fail inside the sandbox with "exec:
// claude: not found".
func checkLocalCLI(a *assistant.Assistant, mounts []sandbox.Mount) error {
	for _, c := range localCLIs {
		if c.command != a.Sandbox.Command {
			continue
		}
		for _, m := range mounts {
			if m.Target == c.target {
				return nil
			}
		}
		return fmt.Errorf("assistant %s runs %s in the local runtime, which runs the host's binary, and there is none: set %s to its path, put %s on PATH (%s), or use --runtime docker (its image has it)",
			a.ID, c.name, c.env, c.name, c.install)
	}
	return nil // another CLI: found on the host's PATH inside, if at all
}

// Close stops everything openEnv started, newest first, and returns the
// errors joined. It is safe on a partly built env.
func (env *appEnv) Close(ctx context.Context) error {
	var errs []error
	for i := len(env.closers) - 1; i >= 0; i-- {
		if err := env.closers[i](ctx); err != nil && !errors.Is(err, context.Canceled) {
			errs = append(errs, err)
		}
	}
	env.closers = nil
	return errors.Join(errs...)
}

// unknownAssistant says that id is no assistant of app, with the one it
// was likely meant to be and those there are.
func unknownAssistant(app *assistant.App, id string) error {
	ids := assistantIDs(app)
	if len(ids) == 0 {
		return fmt.Errorf("unknown assistant %q: the app has none that loaded (`agentbox check` says why; `agentbox new assistant NAME` adds one)", id)
	}
	if c := closestName(id, ids); c != "" {
		return fmt.Errorf("unknown assistant %q (did you mean %q? have: %s)", id, c, strings.Join(ids, ", "))
	}
	return fmt.Errorf("unknown assistant %q (have: %s)", id, strings.Join(ids, ", "))
}

func assistantIDs(app *assistant.App) []string {
	ids := make([]string, 0, len(app.Assistants))
	for id := range app.Assistants {
		ids = append(ids, id)
	}
	sort.Strings(ids)
	return ids
}

// cliLogger logs warnings and errors to stderr for one-shot commands
// (silent with --json, where stderr is for the human and stdout is data,
// apart from errors).
func cliLogger(w io.Writer, quiet bool) *slog.Logger {
	level := slog.LevelWarn
	if quiet {
		level = slog.LevelError
	}
	return slog.New(slog.NewTextHandler(w, &slog.HandlerOptions{Level: level}))
}
