package pipeline

import (
	"fmt"
	"maps"
	"slices"

	"github.com/agentbox/agentbox/assistant"
	"github.com/agentbox/agentbox/bridge"
	"github.com/agentbox/agentbox/bridge/egress"
	"github.com/agentbox/agentbox/chat"
)

// NoticeEgressDenied is the code of the notice sent when the sandbox's
// egress proxy refuses a request (once per host and reason in a turn).
const NoticeEgressDenied = "egress_denied"

// egressOptions turns the assistant's egress policy and secrets into the
// bridge's, with the secrets' values read now (a missing variable is an
// error naming it, never a value).
func (t *turn) egressOptions(a *assistant.Assistant) (*bridge.EgressOptions, error) {
	return t.p.egressOptions(a, t.egressDenied)
}

// egressOptions is the bridge's egress options for a's sandboxes (turns'
// and terminals'); onDeny hears of each refusal.
func (p *Pipeline) egressOptions(a *assistant.Assistant, onDeny func(*egress.Denial)) (*bridge.EgressOptions, error) {
	eg := a.Sandbox.Egress
	if eg == nil {
		return nil, nil
	}
	o := &bridge.EgressOptions{
		Policy:  eg.Policy(),
		RootCAs: p.cfg.Bridge.EgressRootCAs,
		OnDeny:  onDeny,
	}
	for _, name := range slices.Sorted(maps.Keys(a.Sandbox.Secrets)) {
		s := a.Sandbox.Secrets[name]
		v, ok, err := s.Resolve(name)
		if err != nil {
			return nil, &chat.Error{Code: chat.ErrAuth, Message: "assistant " + a.ID + ": " + err.Error(), Err: err}
		}
		if !ok {
			// Yao leaves an unset optional secret out; so do we.
			p.log.Warn("sandbox secret left out: its variable is not set", "assistant", a.ID, "secret", name)
			continue
		}
		if len(v) < egress.MinSecretLen {
			err := fmt.Errorf("secret %s: its value is %d bytes; the egress proxy recognises a value in what comes back only from %d, so a shorter one is refused", name, len(v), egress.MinSecretLen)
			return nil, &chat.Error{Code: chat.ErrAuth, Message: "assistant " + a.ID + ": " + err.Error(), Err: err}
		}
		o.Secrets = append(o.Secrets, egress.Secret{Name: name, Value: v, Hosts: s.Hosts, Headers: s.Headers})
	}
	return o, nil
}

// egressDenied tells the client that the sandbox was refused a host: the
// agent reads the proxy's 403, the user reads this notice.
func (t *turn) egressDenied(d *egress.Denial) {
	msg := "The sandbox was refused a connection: " + d.Why
	if d.Target.Port != 0 {
		msg = "The sandbox was refused " + d.Target.String() + ": " + d.Why
	}
	if d.Hint != "" {
		msg += ". To allow it: " + d.Hint + "."
	}
	props := map[string]any{"code": NoticeEgressDenied, "message": msg, "reason": d.Reason}
	if d.Target.Port != 0 {
		props["host"] = d.Target.String()
	}
	t.p.log.Info("egress denied", "user", t.req.UserID, "chat", t.req.ChatID, "host", props["host"], "reason", d.Reason)
	chat.Whole(t.emit, t.nextID("notice"), chat.TypeNotice, msg, props)
}
