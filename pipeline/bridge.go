package pipeline

import (
	"cmp"
	"context"
	"crypto/x509"
	"encoding/json"
	"fmt"
	"maps"
	"slices"
	"sync/atomic"
	"time"

	"github.com/agentbox/agentbox/assistant"
	"github.com/agentbox/agentbox/bridge"
	"github.com/agentbox/agentbox/chat"
	"github.com/agentbox/agentbox/connector"
	"github.com/agentbox/agentbox/executor"
	"github.com/agentbox/agentbox/jsapi"
	"github.com/agentbox/agentbox/sandbox"
)

// BridgeConfig turns on the per-request bridge: the assistant's host tools
// over MCP and, for the claude command, a model proxy, so sandboxes run
// with network "none" and never hold a real API key.
type BridgeConfig struct {
	// Dir is the parent of the per-request socket folders; it must be
	// short (Unix socket paths hold 107 bytes). "" = $TMPDIR/agentbox-bridge.
	Dir string
	// Binary is the static agentbox binary mounted into sandboxes
	// ("" = the running executable, which must then be static).
	Binary string
	// Tools are Go host tools registered by an embedder, by name. An
	// assistant's agent sees one only when package.yao lists it.
	Tools map[string]bridge.Tool
	// UID and GID own the sockets: the sandbox user (0 = 1000).
	UID, GID int
	// EgressRootCAs are the roots the egress proxy trusts when it
	// re-encrypts a tunnel to a secret's host (nil: the system's). For
	// tests with their own CA; verification cannot be turned off.
	EgressRootCAs *x509.CertPool
	// Gateways carry the bridge over the network for sandboxes of the
	// runtimes named (kubernetes pods that share no file system with the
	// server); other runtimes' sandboxes get Unix sockets.
	Gateways map[string]*bridge.Gateway
}

// proxied reports whether the model traffic of a's CLI goes through the
// bridge's model proxy: Claude Code (Messages API), Codex (Responses API),
// the Gemini CLI (generateContent) and opencode (its anthropic or openai
// provider). Cursor talks to its own service.
func (t *turn) proxied(a *assistant.Assistant) bool { return t.p.proxied(a) }

func (p *Pipeline) proxied(a *assistant.Assistant) bool {
	return p.cfg.Bridge != nil && a.Sandbox != nil && proxiedCommands[a.Sandbox.Command]
}

// proxiedCommands are the sandbox commands whose CLI reaches the model
// through the bridge's model proxy.
var proxiedCommands = map[string]bool{"claude": true, "codex": true, "gemini": true, "opencode": true}

// connection resolves the turn's connector for a CLI. A scripted connector
// gets a fresh scripted server for this turn, closed when the turn ends.
func (t *turn) connection(app *assistant.App) (executor.Connection, error) {
	r, err := t.resolve(app)
	if err != nil {
		return executor.Connection{}, err
	}
	conn := executor.Connection{Type: r.Type, Host: r.Host, Key: r.Key, Model: r.Model}
	t.authMode = r.AuthMode
	if r.Type == "scripted" {
		srv, err := connector.StartScripted(r.Script)
		if err != nil {
			return conn, &chat.Error{Code: chat.ErrInternal, Message: "scripted connector " + t.connID + ": " + err.Error(), Err: err}
		}
		t.closers = append(t.closers, srv.Close)
		conn.Type, conn.Host, conn.Key = "anthropic", srv.URL, "scripted"
	}
	return conn, nil
}

// speaks checks that the turn's connector speaks the API the command's CLI
// calls: Codex the Responses API (openai). Claude Code's Messages calls
// are translated for an openai connector, opencode uses the provider of
// the connector's type, a scripted connector answers them all, and the
// Gemini CLI's connector names a host that speaks the Gemini API.
func (t *turn) speaks(command string, app *assistant.App) error {
	r, err := t.resolve(app)
	if err != nil {
		return err
	}
	want := map[string]string{"codex": connector.TypeOpenAI}[command]
	if want == "" || r.Type == want || r.Type == connector.TypeScripted {
		return nil
	}
	return chat.Errorf(chat.ErrInvalidRequest, "connector %s has type %s, but the %s command's CLI calls the %s API: use a connector of type %s", t.connID, r.Type, command, want, want)
}

// upstreamAuth is how the model proxy presents the connector's key: its
// auth_mode when it sets one, else its type's default.
func upstreamAuth(connType, authMode string) string {
	switch authMode {
	case connector.AuthBearer:
		return bridge.AuthBearer
	case connector.AuthXAPIKey:
		return bridge.AuthAPIKey
	}
	if connType == "anthropic" || connType == "scripted" || connType == "" {
		return bridge.AuthAPIKey
	}
	return bridge.AuthBearer
}

// readableBinary says whether a's sandboxes need a bridge binary their user
// may read: gVisor's kernel cannot run an execute-only one.
func readableBinary(app *assistant.App, a *assistant.Assistant) bool {
	return isolationOf(app, a) == sandbox.IsolationGVisor
}

// startBridge starts the request's bridge session before the sandbox is
// created (its sockets are mounted into it).
func (t *turn) startBridge(ctx context.Context, runtime string, app *assistant.App, a *assistant.Assistant) (*bridge.Session, error) {
	cfg := t.p.cfg.Bridge
	tools, err := t.hostTools(app, a)
	if err != nil {
		return nil, err
	}
	// A kept chat's bridge serves its later turns too: a refusal, or an
	// approval, is the turn's at hand.
	cur := t.cur
	at := func() *turn {
		if cur != nil {
			return cur.Load()
		}
		return t
	}
	if asks(a) {
		tools = append(tools, promptTool(a.Approval.Timeout, at))
	}
	opts := bridge.Options{
		Dir: cfg.Dir, Binary: cfg.Binary, UID: cfg.UID, GID: cfg.GID, ReadableBinary: readableBinary(app, a),
		UserID: t.req.UserID, ChatID: t.req.ChatID, Tools: tools,
		Logger:    t.p.log.With("user", t.req.UserID, "chat", t.req.ChatID),
		Gateway:   cfg.Gateways[runtime],
		RemoteMCP: hasRemoteMCP(app),
		Server:    t.p.proxyLimits,
		// The connections of a kept chat's sandbox outlive this turn; the
		// bound is the app's at the sandbox's start.
		Connections: limits(app).ModelProxy.Connections,
		Ports:       t.p.previewPorts(a),
	}
	opts.OnRefuse = func(r bridge.Refusal) { at().modelRefused(r) }
	if t.keep {
		// A kept chat's bridge serves its sandbox across turns: it ends
		// with the sandbox, not with this request.
		ctx = context.WithoutCancel(ctx)
	} else if a.Sandbox.Timeout > 0 {
		// Hooks run before and after the CLI within the same request.
		opts.Deadline = time.Now().Add(a.Sandbox.Timeout + 2*a.HookTimeout + time.Minute)
	}
	if t.proxied(a) {
		conn, err := t.connection(app)
		if err != nil {
			return nil, err
		}
		if err := t.speaks(a.Sandbox.Command, app); err != nil {
			return nil, err
		}
		if t.authMode == connector.AuthAPIKey {
			return nil, chat.Errorf(chat.ErrInternal, "connector %s: auth_mode api-key is not supported for a sandboxed assistant's model proxy (use bearer or x-api-key)", t.connID)
		}
		opts.Upstream, opts.UpstreamAuth = conn, upstreamAuth(conn.Type, t.authMode)
		opts.Breaker = t.p.breakers.Get(t.connID)
		t.upstreamConn = t.connID
	}
	if opts.Egress, err = t.egressOptions(a); err != nil {
		return nil, err
	}
	sess, err := bridge.Start(ctx, opts)
	if err != nil {
		return nil, &chat.Error{Code: chat.ErrSandbox, Message: "bridge not started: " + err.Error(), Err: err}
	}
	return sess, nil
}

// hostTools turns the assistant's declared tools into bridge tools: hook
// functions run in the assistant's JS runtime with the request's context;
// the rest must be Go tools registered on the pipeline. The tools of its
// process MCP servers join them (processHostTools).
func (t *turn) hostTools(app *assistant.App, a *assistant.Assistant) ([]bridge.Tool, error) {
	hooks := t.hooks
	var out []bridge.Tool
	// The hook functions run with the context of the turn at hand: a kept
	// chat's bridge serves its later turns too (sandboxFor repoints it).
	t.hookCtx = &atomic.Pointer[jsapi.Context]{}
	t.hookCtx.Store(t.hc)
	ref := t.hookCtx
	t.cur = &atomic.Pointer[turn]{}
	t.cur.Store(t)
	if a.SkillAuthoring != nil && t.trial == nil { // a skill's test proposes none
		if t.p.cfg.Skills != nil {
			out = append(out, t.proposeSkillTool(a))
		} else {
			t.p.log.Warn("skill authoring is on but this server keeps no skill proposals: propose_skill is not offered", "assistant", a.ID)
		}
	}
	for _, d := range a.Tools {
		if d.Function == "" {
			gt, ok := t.p.cfg.Bridge.Tools[d.Name]
			if !ok {
				return nil, chat.Errorf(chat.ErrInternal, "assistant %q lists host tool %q, which has no function and is not registered on this server", a.ID, d.Name)
			}
			if d.Description != "" {
				gt.Description = d.Description
			}
			if d.Timeout > 0 {
				gt.Timeout = d.Timeout
			}
			out = append(out, gt)
			continue
		}
		if !hooks.Has(d.Function) {
			return nil, chat.Errorf(chat.ErrHook, "assistant %q: host tool %q calls hook function %q, which the hooks do not define", a.ID, d.Name, d.Function)
		}
		fn := d.Function
		out = append(out, bridge.Tool{
			Name:        d.Name,
			Description: d.Description,
			InputSchema: json.RawMessage(d.Parameters),
			Timeout:     d.Timeout,
			Handler: func(ctx context.Context, args json.RawMessage) (any, error) {
				var v any
				if len(args) > 0 {
					if err := json.Unmarshal(args, &v); err != nil {
						return nil, fmt.Errorf("arguments: %w", err)
					}
				}
				return hooks.Call(ctx, ref.Load(), fn, v)
			},
		})
	}
	return append(out, t.processHostTools(app, a)...), nil
}

// wireBridge points the executor request at the bridge: the keyless
// loopback connection, the host-tools MCP server, the assistant's MCP
// servers without their credentials (mcpForSandbox) and the argv wrapper
// that serves the model proxy inside the sandbox. The proxy holds the CLI to the
// turn's model and to maxTokens (0: the CLI's own limit).
func (t *turn) wireBridge(app *assistant.App, req *executor.Request, maxTokens int) error {
	sess := t.bridge
	if t.proxied(t.asst) {
		if t.upstreamConn != t.connID { // a Create hook switched connectors
			conn, err := t.connection(app)
			if err != nil {
				return err
			}
			if err := sess.SetUpstream(conn, upstreamAuth(conn.Type, t.authMode), t.p.breakers.Get(t.connID)); err != nil {
				return &chat.Error{Code: chat.ErrInternal, Message: "connector " + t.connID + ": " + err.Error(), Err: err}
			}
			t.upstreamConn = t.connID
		}
		c := sess.Connection()
		c.Model = cmp.Or(req.Arguments.Model, c.Model)
		req.Connector = c
		mp := limits(app).ModelProxy
		if err := sess.SetLimits(bridge.Limits{Model: c.Model, MaxTokens: maxTokens, Calls: mp.CallsPerTurn, Parallel: mp.ParallelCalls}); err != nil {
			return &chat.Error{Code: chat.ErrInternal, Message: "bridge limits: " + err.Error(), Err: err}
		}
	}
	// The wrapper serves the model proxy, the egress proxy or both.
	req.WrapArgv = sess.WrapCommand
	// The session mounts the agentbox binary, which runs the MCP filter.
	req.Relay = bridge.GuestBinary
	run, err := mcpForSandbox(req.Assistant, sess)
	if err != nil {
		return err
	}
	req.Assistant, req.MCPServerEnv = run, sess.MCPServerEnv()
	if asks(t.asst) {
		req.PermissionPromptTool = PromptToolName
		req.Arguments.DisallowedTools = slices.Concat(req.Arguments.DisallowedTools, readDenies(t.asst.Approval))
		for _, r := range t.asst.Approval.Ask {
			req.PermissionAsk = append(req.PermissionAsk, r.Text)
		}
	}
	if m := sess.MCPServer(); m.Command != "" {
		if req.MCPServers == nil {
			req.MCPServers = map[string]assistant.MCPServer{}
		}
		req.MCPServers[bridge.ServerName] = m
	}
	return nil
}

// NoticeModelRefused is the code of the notice sent when the bridge's
// model proxy refuses a request of the sandbox for a reason the user
// should hear of (a field or tool not allowed, the turn's calls spent,
// memory or connections bounded), once per reason and field in a turn.
const NoticeModelRefused = "model_request_refused"

// modelRefused tells the client that the model proxy refused a request:
// the CLI reads the proxy's error, the user reads this notice.
func (t *turn) modelRefused(r bridge.Refusal) {
	props := map[string]any{"code": NoticeModelRefused, "message": r.Message, "reason": r.Reason}
	if r.Field != "" {
		props["field"] = r.Field
	}
	t.p.log.Info("model request refused", "user", t.req.UserID, "chat", t.req.ChatID, "reason", r.Reason, "field", r.Field)
	chat.Whole(t.emit, t.nextID("notice"), chat.TypeNotice, "The model proxy refused a request of the sandbox: "+r.Message, props)
}

// withBridgeEnv adds what the sandbox needs to reach sess (its credentials
// when the bridge runs over the network) to env.
func withBridgeEnv(env map[string]string, sess *bridge.Session) map[string]string {
	if sess == nil {
		return env
	}
	extra := sess.SandboxEnv()
	if len(extra) == 0 {
		return env
	}
	if env == nil {
		env = make(map[string]string, len(extra))
	}
	maps.Copy(env, extra)
	return env
}
