package bridge

import (
	"context"
	"crypto/x509"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"time"

	"github.com/agentbox/agentbox/bridge/egress"
	"github.com/agentbox/agentbox/chat"
	"github.com/agentbox/agentbox/sandbox"
)

// The session's egress proxy: a third socket, egress.sock, with an HTTP(S)
// forward proxy behind it (package bridge/egress) that is the sandbox's
// only way to other hosts. Inside the sandbox `agentbox bridge run` serves
// it on loopback and points HTTP_PROXY and HTTPS_PROXY at it; secrets
// appear there as placeholders, and the CA of the proxy's terminated
// tunnels is added to the trusted roots.

// Paths and addresses of the egress proxy inside the sandbox.
const (
	// GuestEgressSocket is where the egress socket appears.
	GuestEgressSocket = "/run/agentbox/egress.sock"
	// GuestEgressCA is the per-request CA certificate (PEM, read-only),
	// present when the session has secrets.
	GuestEgressCA = "/run/agentbox/egress-ca.pem"
	// GuestEgressAddr is the loopback address of the in-sandbox egress
	// proxy (a free port of the same IP when it is taken).
	GuestEgressAddr = "127.0.0.1:41881"
)

// caGrace is how long the CA outlives the session's deadline (a CLI may
// still be finishing a request when the deadline is reached).
const caGrace = 10 * time.Minute

// caLifetime bounds the CA of a session without a deadline.
const caLifetime = 24 * time.Hour

// EgressOptions turn on a session's egress proxy.
type EgressOptions struct {
	// Policy says which hosts and ports the sandbox may reach.
	Policy egress.Policy
	// Secrets go into requests to their hosts; the sandbox gets each
	// Name set to a placeholder (Start makes them; Placeholder is ignored).
	Secrets []egress.Secret
	// RootCAs are the roots the proxy trusts when it re-encrypts a
	// terminated tunnel (nil: the system's). For tests with their own CA;
	// verification cannot be turned off.
	RootCAs *x509.CertPool
	// Resolver looks up names (nil: the system's resolver).
	Resolver egress.Resolver
	// OnDeny is told about refused requests, once per host and reason. It
	// must not block.
	OnDeny func(*egress.Denial)
}

// egressServer is the session's egress proxy and what the sandbox is told
// about it.
type egressServer struct {
	proxy  *egress.Proxy
	caPath string            // host path of the CA file ("" without secrets)
	env    map[string]string // secret name -> placeholder
}

// startEgress creates the proxy on egress.sock (and the CA file when there
// are secrets); the session serves it.
func (s *Session) startEgress(o *EgressOptions) error {
	e := &egressServer{env: map[string]string{}}
	cfg := egress.Config{Policy: o.Policy, RootCAs: o.RootCAs, Resolver: o.Resolver, Logger: s.log, OnDeny: o.OnDeny}
	var hosts []egress.Rule
	for _, sec := range o.Secrets {
		if _, dup := e.env[sec.Name]; dup {
			return fmt.Errorf("bridge egress: secret %s given twice", sec.Name)
		}
		sec.Placeholder = egress.NewPlaceholder(sec.Name)
		e.env[sec.Name] = sec.Placeholder
		cfg.Secrets = append(cfg.Secrets, sec)
		hosts = append(hosts, sec.Hosts...)
	}
	if len(hosts) > 0 {
		notAfter := time.Now().Add(caLifetime)
		if !s.opts.Deadline.IsZero() {
			notAfter = s.opts.Deadline.Add(caGrace)
		}
		ca, err := egress.NewCA(hosts, notAfter)
		if err != nil {
			return err
		}
		cfg.CA = ca
		if s.creds != nil {
			s.creds.EgressCA = string(ca.CertPEM())
		}
		e.caPath = filepath.Join(s.dir, "egress-ca.pem")
		// Public: the sandbox user reads it through a read-only mount.
		if err := os.WriteFile(e.caPath, ca.CertPEM(), 0o644); err != nil {
			return fmt.Errorf("bridge egress CA: %w", err)
		}
	}
	p, err := egress.New(cfg)
	if err != nil {
		return err
	}
	ln, err := s.listen("egress.sock")
	if err != nil {
		return err
	}
	e.proxy = p
	s.egress = e
	s.wg.Go(func() {
		if err := p.Serve(ln); err != nil {
			s.log.Warn("bridge egress proxy: serve", "err", err)
		}
	})
	return nil
}

// egressMounts are the egress socket and the CA file.
func (s *Session) egressMounts() []sandbox.Mount {
	if s.egress == nil {
		return nil
	}
	if s.gwID != "" {
		return nil // the socket and the CA come over the network
	}
	m := []sandbox.Mount{{Source: filepath.Join(s.dir, "egress.sock"), Target: GuestEgressSocket, Writable: true}}
	if s.egress.caPath != "" {
		m = append(m, sandbox.Mount{Source: s.egress.caPath, Target: GuestEgressCA})
	}
	return m
}

// egressArgs are the flags of `agentbox bridge run` for the egress proxy:
// its socket and address, the CA, and the placeholders to set.
func (s *Session) egressArgs() []string {
	if s.egress == nil {
		return nil
	}
	args := []string{"--egress-socket", s.guestSocket(channelEgress, GuestEgressSocket), "--egress-listen", GuestEgressAddr}
	if s.egress.caPath != "" {
		args = append(args, "--egress-ca", s.guestSocket(gatewayEgressCA[len(GatewayPrefix):], GuestEgressCA))
	}
	names := make([]string, 0, len(s.egress.env))
	for n := range s.egress.env {
		names = append(names, n)
	}
	slices.Sort(names)
	for _, n := range names {
		// Placeholders are not secrets: argv may show them.
		args = append(args, "--setenv", n+"="+s.egress.env[n])
	}
	return args
}

// MCPServerEnv maps the variables a stdio MCP server needs to reach hosts
// through the egress proxy (the proxy's, and the CA's when there are
// secrets) to the variables of the CLI's environment, set by `agentbox
// bridge run`, they are copied from (see executor.Request.MCPServerEnv).
// It is empty without an egress proxy.
func (s *Session) MCPServerEnv() map[string]string {
	out := map[string]string{}
	if s.egress == nil {
		return out
	}
	for _, k := range proxyEnv {
		out[k] = k
	}
	if s.egress.caPath != "" || (s.creds != nil && s.creds.EgressCA != "") {
		for _, k := range rootsEnv {
			out[k] = envEgressRoots
		}
		out["NODE_EXTRA_CA_CERTS"] = envEgressCA
	}
	return out
}

// closeEgress stops the proxy (tunnels and requests in flight end).
func (s *Session) closeEgress(ctx context.Context) error {
	if s.egress == nil {
		return nil
	}
	return s.egress.proxy.Close(ctx)
}

// Placeholders are the secrets' placeholders by variable name, as the
// sandbox sees them (empty without secrets).
func (s *Session) Placeholders() map[string]string {
	out := map[string]string{}
	if s.egress != nil {
		for k, v := range s.egress.env {
			out[k] = v
		}
	}
	return out
}

// EgressUsage is the sandbox's traffic through the egress proxy so far,
// per host, sorted by host (nil without an egress proxy). It is counted on
// the host, so the sandbox cannot under-report it.
func (s *Session) EgressUsage() []chat.HostUsage {
	if s.egress == nil {
		return nil
	}
	return s.egress.proxy.Usage()
}
