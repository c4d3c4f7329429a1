package pipeline

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"sync/atomic"

	"github.com/agentbox/agentbox/assistant"
	"github.com/agentbox/agentbox/bridge"
	"github.com/agentbox/agentbox/chat"
	"github.com/agentbox/agentbox/preview"
	"github.com/agentbox/agentbox/sandbox"
)

// TypePortOpened is the event a turn sends when a port its assistant
// declared starts listening in the chat's sandbox: props port, label.
// GET /api/chats/{chat}/ports gives its preview URL.
const TypePortOpened = "port_opened"

// previewPorts are the ports of a's sandboxes the bridge relays: the
// declared ones, when this server serves previews.
func (p *Pipeline) previewPorts(a *assistant.Assistant) []int {
	if p.cfg.Previews == nil || a.Sandbox == nil {
		return nil
	}
	out := make([]int, len(a.Sandbox.Ports))
	for i, port := range a.Sandbox.Ports {
		out[i] = port.Port
	}
	return out
}

// openPreviews starts the port relay's guest in a new sandbox and
// registers its ports' previews. The returned stop ends both: the
// sandbox's removal calls it. Without declared ports it does nothing.
func (t *turn) openPreviews(ctx context.Context, a *assistant.Assistant, sb sandbox.Sandbox, sess *bridge.Session, cur *atomic.Pointer[turn]) (stop func(), err error) {
	if sess == nil || sess.Ports() == nil {
		return func() {}, nil
	}
	relay := sess.Ports()
	rctx, cancel := context.WithCancel(context.WithoutCancel(ctx))
	proc, err := sb.Start(rctx, sandbox.ExecRequest{Argv: sess.PortsCommand()})
	if err != nil {
		cancel()
		return nil, &chat.Error{Code: chat.ErrSandbox, Message: "port relay not started: " + err.Error(), Err: err}
	}
	log := t.p.log.With("user", t.req.UserID, "chat", t.req.ChatID)
	done := make(chan struct{})
	go func() {
		defer close(done)
		go func() { _, _ = io.Copy(io.Discard, proc.Stdout()) }()
		sc := bufio.NewScanner(proc.Stderr())
		for sc.Scan() {
			log.Warn("port relay: " + sc.Text())
		}
		if code, err := proc.Wait(rctx); rctx.Err() == nil && (err != nil || code != 0) {
			log.Warn("port relay ended", "exit_code", code, "error", err)
		}
	}()
	ports := make([]preview.Port, len(a.Sandbox.Ports))
	for i, p := range a.Sandbox.Ports {
		ports[i] = preview.Port{Port: p.Port, Label: p.Label}
	}
	pv := t.p.cfg.Previews.Open(preview.Owner{User: t.req.UserID, Chat: t.req.ChatID}, relayDialer{relay}, ports)
	relay.OnListening(func(listening []int) {
		for _, port := range pv.SetListening(listening) {
			at := t
			if cur != nil {
				at = cur.Load()
			}
			label := ""
			for _, p := range ports {
				if p.Port == port {
					label = p.Label
				}
			}
			// A turn that ended drops it; the ports API still lists it.
			chat.Whole(at.emit, at.nextID("port"), TypePortOpened, fmt.Sprintf("Port %d is open", port),
				map[string]any{"port": port, "label": label})
		}
	})
	return func() {
		pv.End("the chat's sandbox stopped")
		cancel()
		_ = proc.Kill()
		<-done
	}, nil
}

// relayDialer is the bridge's port relay as a preview.Dialer.
type relayDialer struct{ r *bridge.PortRelay }

func (d relayDialer) Dial(ctx context.Context, port int) (net.Conn, error) {
	c, err := d.r.Dial(ctx, port)
	if errors.Is(err, bridge.ErrPortRefused) {
		return nil, fmt.Errorf("%w (%v)", preview.ErrNotListening, err)
	}
	return c, err
}
