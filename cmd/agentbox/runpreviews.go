package main

import (
	"context"
	"fmt"
	"io"
	"maps"
	"net"
	"net/http"
	"net/url"
	"slices"
	"sync"
	"time"

	"github.com/agentbox/agentbox/assistant"
	"github.com/agentbox/agentbox/chat"
	"github.com/agentbox/agentbox/desktop"
	"github.com/agentbox/agentbox/pipeline"
	"github.com/agentbox/agentbox/preview"
)

// The previews of agentbox run. A turn whose assistant declares ports
// (sandbox.ports, computer.ports, a desktop) has no server to serve their
// previews, so run serves them itself: on a loopback listener of its own
// (--preview-addr) for as long as it runs, on the same preview hosts a
// server has ("<token>.preview.localhost:PORT", which browsers resolve to
// loopback), with the same tickets and cookies. Each port_opened event
// prints the port's URL. After the answer, a sandbox that lives on (the
// assistant keeps it: sandbox.keep_alive, a desktop) keeps serving while
// run waits: until Ctrl-C, or until the sandbox stops (its keep_alive
// passed without a turn). Whether run waits is --previews: wait, exit, or
// auto (wait when stderr is a terminal: a person is there to press
// Ctrl-C; a script gets its exit).

// Modes of --previews.
const (
	previewsAuto = "auto"
	previewsWait = "wait"
	previewsExit = "exit"
)

// runTicketTTL is how long a URL run prints may be opened: the run's
// life, in practice (its signing key ends with the process).
const runTicketTTL = 24 * time.Hour

// runPreviewConfig is the preview configuration of agentbox run: the
// default domain (app.jsonc's preview_domain names the server's hosts,
// which do not lead to run's listener) and tickets that last the run.
func runPreviewConfig() *preview.Config {
	return &preview.Config{Domain: preview.DefaultDomain, TicketTTL: runTicketTTL}
}

// checkPreviewFlags checks --previews and --preview-addr.
func checkPreviewFlags(mode, addr string) error {
	if !slices.Contains([]string{previewsAuto, previewsWait, previewsExit}, mode) {
		return fmt.Errorf("--previews %q: want auto, wait or exit", mode)
	}
	host, _, err := net.SplitHostPort(addr)
	if err != nil {
		return fmt.Errorf("--preview-addr %q: want HOST:PORT, like 127.0.0.1:8790 (port 0: any free port)", addr)
	}
	if ip := net.ParseIP(host); host != "localhost" && (ip == nil || !ip.IsLoopback()) {
		return fmt.Errorf("--preview-addr %q: want a loopback address (127.0.0.1:PORT): the preview URLs are *.preview.localhost, which browsers resolve to loopback", addr)
	}
	return nil
}

// runPreviews serves the previews of one chat of agentbox run.
type runPreviews struct {
	pv         *preview.Manager
	user, chat string
	desktop    bool          // the assistant has a desktop (its port opens noVNC)
	keepAlive  time.Duration // the assistant's sandbox.keep_alive
	srv        *http.Server
	addr       string
	served     chan struct{}

	mu     sync.Mutex
	opened bool // a port_opened event came
}

// startRunPreviews starts serving the previews of a's sandbox in the
// chat, on addr; nil when a declares no ports.
func startRunPreviews(ctx context.Context, pv *preview.Manager, a *assistant.Assistant, addr, user, chatID string) (*runPreviews, error) {
	if a == nil || a.Sandbox == nil || len(a.Sandbox.Ports) == 0 {
		return nil, nil
	}
	ln, err := (&net.ListenConfig{}).Listen(ctx, "tcp", addr)
	if err != nil {
		return nil, fmt.Errorf("previews: listen on %s: %w (--preview-addr picks another address)", addr, err)
	}
	rp := &runPreviews{pv: pv, user: user, chat: chatID, desktop: a.Sandbox.Desktop != nil, keepAlive: a.Sandbox.KeepAlive,
		addr: ln.Addr().String(), served: make(chan struct{})}
	pv.SetOrigin(&url.URL{Scheme: "http", Host: rp.addr})
	rp.srv = &http.Server{Handler: pv.Handler(), ReadHeaderTimeout: 30 * time.Second}
	go func() {
		defer close(rp.served)
		_ = rp.srv.Serve(ln)
	}()
	return rp, nil
}

// Close stops serving: the listener and its connections close.
func (rp *runPreviews) Close() {
	if rp == nil {
		return
	}
	_ = rp.srv.Close()
	<-rp.served
}

// url is a fresh URL of port's preview: noVNC's page for the desktop's.
func (rp *runPreviews) url(port int) (string, error) {
	path := ""
	if rp.desktop && port == desktop.NoVNCPort {
		path = desktop.ViewPath
	}
	return rp.pv.URL(rp.user, rp.chat, port, path, nil)
}

// event gives a port_opened event the port's preview URL (props "url"),
// for the renderer and --json alike.
func (rp *runPreviews) event(e chat.Event) chat.Event {
	if rp == nil || e.Type != pipeline.TypePortOpened || e.Event != chat.Start {
		return e
	}
	u, err := rp.url(propPort(e.Props["port"]))
	if err != nil {
		return e
	}
	rp.mu.Lock()
	rp.opened = true
	rp.mu.Unlock()
	e.Props = maps.Clone(e.Props)
	e.Props["url"] = u
	return e
}

// propPort is a port_opened event's port: an int as the pipeline emits
// it, a float64 once through JSON (0: neither).
func propPort(v any) int {
	switch v := v.(type) {
	case int:
		return v
	case float64:
		return int(v)
	}
	return 0
}

// portName is how run names a port: "site (port 8000)" or "port 8000".
func portName(port int, label string) string {
	if label == "" {
		return fmt.Sprintf("port %d", port)
	}
	return fmt.Sprintf("%s (port %d)", label, port)
}

// afterAnswer ends the previews' part of a run whose turn answered: with
// wait, while the chat's sandbox lives it lists the previews and serves
// them until ctx ends (Ctrl-C) or the sandbox stops; otherwise it says
// how to keep them. dim styles the lines.
func (rp *runPreviews) afterAnswer(ctx context.Context, wait bool, w io.Writer, dim func(string) string) {
	if rp == nil {
		return
	}
	rp.mu.Lock()
	opened := rp.opened
	rp.mu.Unlock()
	list := rp.pv.List(rp.user, rp.chat, nil)
	if len(list) == 0 {
		if opened {
			fmt.Fprintln(w, dim("the previews ended with the turn: its sandbox is removed after the answer unless the assistant keeps it (sandbox.keep_alive)"))
		}
		return
	}
	if !wait {
		fmt.Fprintln(w, dim("the previews end with this run: --previews wait serves them until Ctrl-C"))
		return
	}
	done, why := rp.pv.Ended(rp.user, rp.chat)
	fmt.Fprintf(w, "serving the previews on %s until Ctrl-C (the sandbox stops after %s without a turn: sandbox.keep_alive)\n", rp.addr, rp.keepAlive)
	for _, st := range list {
		u, err := rp.url(st.Port)
		if err != nil {
			continue
		}
		state := ""
		if st.State != preview.StateListening {
			state = ", nothing listens on it yet"
		}
		fmt.Fprintf(w, "  %s%s: %s\n", portName(st.Port, st.Label), state, u)
	}
	select {
	case <-ctx.Done():
		fmt.Fprintln(w, dim("stopped: the sandbox is removed"))
	case <-done:
		fmt.Fprintln(w, dim("the previews ended: "+why()))
	}
}
