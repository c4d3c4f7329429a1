package bridge

import (
	"bytes"
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/netip"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/agentbox/agentbox/bridge/egress"
	"github.com/agentbox/agentbox/bridge/egress/egresstest"
	"github.com/agentbox/agentbox/internal/testenv"
)

func startGateway(t testing.TB) *Gateway {
	t.Helper()
	g, err := NewGateway(GatewayOptions{Listen: "127.0.0.1:0"})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = g.Close() })
	return g
}

// TestGatewayCarriesToolsAndModel runs a session across the network: the
// sandbox gets no socket mounts but the binary, only credentials in its
// environment; the in-sandbox relays reach the tools and the model proxy
// through the gateway with mutual TLS and the token.
func TestGatewayCarriesToolsAndModel(t *testing.T) {
	g := startGateway(t)
	f := &fakeAnthropic{}
	up := newUpstreamServer(t, f)
	var calls atomic.Int32
	s := startSession(t, Options{Tools: testTools(&calls), UserID: "alice", ChatID: "c1",
		Upstream: testUpstream(up.URL), Transport: up.Client().Transport, Gateway: g})
	if !s.Networked() {
		t.Fatal("session is not networked")
	}
	if m := s.Mounts(); len(m) != 1 || m[0].Target != GuestBinary {
		t.Fatalf("mounts = %+v, want the binary only", m)
	}
	env := s.SandboxEnv()
	if env[EnvCredentials] == "" {
		t.Fatal("no credentials in the sandbox environment")
	}
	wrapped := strings.Join(s.WrapCommand([]string{"claude"}), " ")
	if !strings.Contains(wrapped, "--socket gateway:model.sock") {
		t.Fatalf("wrapped argv = %s", wrapped)
	}
	if args := strings.Join(s.MCPServer().Args, " "); !strings.Contains(args, "gateway:tools.sock") {
		t.Fatalf("MCP args = %s", args)
	}
	t.Setenv(EnvCredentials, env[EnvCredentials])

	// Tools: the real relay in a child process, as in the sandbox.
	cmd := exec.Command(os.Args[0])
	cmd.Env = append(os.Environ(), "AGENTBOX_BRIDGE_GUEST=mcp", "AGENTBOX_BRIDGE_SOCKET=gateway:tools.sock")
	client := mcp.NewClient(&mcp.Implementation{Name: "test", Version: "1"}, nil)
	cs, err := client.Connect(context.Background(), &mcp.CommandTransport{Command: cmd}, nil)
	if err != nil {
		t.Fatalf("connect: %v", err)
	}
	defer cs.Close()
	res, err := cs.CallTool(context.Background(), &mcp.CallToolParams{Name: "lookup_order", Arguments: map[string]any{"order_id": "A-1"}})
	if err != nil || res.IsError {
		t.Fatalf("call: %v %+v", err, res)
	}
	if calls.Load() != 1 {
		t.Fatalf("tool calls = %d", calls.Load())
	}

	// Model: the loopback relay to the gateway's model channel.
	ln, err := ListenLoopback("127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- GuestProxy(ctx, ln, GatewayPrefix+channelModel) }()
	resp := post(t, http.DefaultClient, "http://"+ln.Addr().String(), "/v1/messages", s.Token(), `{"model":"x"}`)
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != 200 || !strings.Contains(string(body), `"hi"`) {
		t.Fatalf("messages: %d %s", resp.StatusCode, body)
	}
	if h := f.lastHeader(); h.Get("X-Api-Key") != realKey {
		t.Fatalf("upstream key = %q", h.Get("X-Api-Key"))
	}
	cancel()
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	http.DefaultClient.CloseIdleConnections()

	// After Close the session's credentials open nothing.
	_ = s.Close(context.Background())
	c, err := dialGateway(context.Background(), channelModel)
	if err == nil {
		_ = c.SetReadDeadline(time.Now().Add(5 * time.Second))
		if n, rerr := c.Read(make([]byte, 1)); rerr == nil || n > 0 {
			t.Fatalf("a closed session's connection was served (read %d, %v)", n, rerr)
		}
		c.Close()
	}
}

// TestGatewayRefusals: a wrong token, an unknown channel, a certificate of
// another gateway and no certificate at all get nowhere.
func TestGatewayRefusals(t *testing.T) {
	g := startGateway(t)
	other := startGateway(t)
	var calls atomic.Int32
	s := startSession(t, Options{Tools: testTools(&calls), Gateway: g})
	s2 := startSession(t, Options{Tools: testTools(&calls), Gateway: other})
	creds := func(s *Session) *Credentials { c := *s.creds; return &c }

	refused := func(name string, c *Credentials, channel string) {
		t.Helper()
		t.Setenv(EnvCredentials, c.encode())
		conn, err := dialGateway(context.Background(), channel)
		if err != nil {
			return // refused in the handshake
		}
		defer conn.Close()
		// An MCP initialize: a served connection answers it.
		_, _ = fmt.Fprintln(conn, `{"jsonrpc":"2.0","id":1,"method":"ping"}`)
		_ = conn.SetReadDeadline(time.Now().Add(5 * time.Second))
		if n, err := conn.Read(make([]byte, 64)); err == nil || n > 0 {
			t.Errorf("%s: served (read %d bytes)", name, n)
		}
	}
	bad := creds(s)
	bad.Token = "agentbox-bridge-wrong"
	refused("wrong token", bad, channelTools)
	refused("unknown channel", creds(s), channelModel)
	foreign := creds(s2)
	foreign.Address = g.Address()
	refused("other gateway's certificate", foreign, channelTools)
	// Another session's token with this session's certificate.
	s3 := startSession(t, Options{Tools: testTools(&calls), Gateway: g})
	mixed := creds(s)
	mixed.Token = s3.creds.Token
	refused("another session's token", mixed, channelTools)

	// No client certificate: the handshake fails.
	pool := x509.NewCertPool()
	pool.AppendCertsFromPEM([]byte(s.creds.CA))
	conn, err := tls.Dial("tcp", g.Address(), &tls.Config{RootCAs: pool, ServerName: "127.0.0.1"})
	if err == nil {
		_ = conn.SetReadDeadline(time.Now().Add(5 * time.Second))
		if _, err := conn.Read(make([]byte, 1)); err == nil {
			t.Error("served a connection without a client certificate")
		}
		conn.Close()
	}
	if calls.Load() != 0 {
		t.Fatalf("tool calls = %d", calls.Load())
	}
}

// TestGatewayBoundsHandshakes: connections that never finish their
// handshake hold at most gatewayMaxPending places; one more is closed at
// once.
func TestGatewayBoundsHandshakes(t *testing.T) {
	g := startGateway(t)
	for range gatewayMaxPending {
		c, err := net.Dial("tcp", g.ListenAddr())
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { c.Close() })
	}
	// Accepted in order: this one finds every place taken.
	c, err := net.Dial("tcp", g.ListenAddr())
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	_ = c.SetReadDeadline(time.Now().Add(gatewayHandshakeTimeout / 2)) // the pending ones are still held then
	if _, err := c.Read(make([]byte, 1)); !errors.Is(err, io.EOF) && !errors.Is(err, syscall.ECONNRESET) {
		t.Fatalf("a connection past the bound: read %v, want it closed", err)
	}
}

func TestGatewayOptions(t *testing.T) {
	if _, err := NewGateway(GatewayOptions{Listen: "0.0.0.0:0"}); err == nil || !strings.Contains(err.Error(), "wildcard") {
		t.Fatalf("wildcard without address: %v", err)
	}
	g, err := NewGateway(GatewayOptions{Listen: "127.0.0.1:0", Address: "agentbox-0.agentbox.svc:41890"})
	if err != nil {
		t.Fatal(err)
	}
	defer g.Close()
	if g.Address() != "agentbox-0.agentbox.svc:41890" {
		t.Fatalf("address = %s", g.Address())
	}
	if _, err := decodeCredentials("e30="); err == nil {
		t.Fatal("empty credentials accepted")
	}
}

// TestGatewayEgressWithCurl: the egress proxy across the network. `agentbox
// bridge run` (GuestRun) gets only the credentials in its environment: it
// writes them (and the egress CA they carry) for the processes after it,
// serves the egress channel on loopback, and curl reaches the allowed host
// with the secret swapped in on the host side.
func TestGatewayEgressWithCurl(t *testing.T) {
	curl := testenv.Tool(t, "curl")
	guestCredentials = filepath.Join(t.TempDir(), "guest", "credentials")
	t.Cleanup(func() { guestCredentials = GuestCredentials })
	pki := egresstest.NewPKI(t)
	srv := egresstest.NewServer(t, pki, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		fmt.Fprintf(w, "hello %s valid=%v %s\n", r.Host, r.Header.Get("Authorization") == "Bearer "+egressSecret, r.Header.Get("Authorization"))
	}), "api.test")
	loop := netip.MustParseAddr("127.0.0.1")
	g := startGateway(t)
	s := startSession(t, Options{Gateway: g, Egress: &EgressOptions{
		Policy:  egress.Policy{Allow: []egress.Rule{mustRule(t, srv.Addr("api.test"))}, Hosts: map[string]netip.Addr{"api.test": loop}},
		Secrets: []egress.Secret{{Name: "GITHUB_TOKEN", Value: egressSecret, Hosts: []egress.Rule{mustRule(t, srv.Addr("api.test"))}}},
		RootCAs: pki.Pool(),
	}})
	if m := s.Mounts(); len(m) != 1 {
		t.Fatalf("mounts = %+v, want the binary only", m)
	}
	argv := strings.Join(s.WrapCommand([]string{"claude"}), " ")
	if !strings.Contains(argv, "--egress-socket gateway:egress.sock") || !strings.Contains(argv, "--egress-ca gateway:egress-ca") {
		t.Fatalf("argv: %s", argv)
	}
	ph := s.Placeholders()["GITHUB_TOKEN"]
	sys := filepath.Join(t.TempDir(), "system.pem")
	if err := os.WriteFile(sys, pki.CertPEM(), 0o644); err != nil {
		t.Fatal(err)
	}
	var out bytes.Buffer
	code, err := GuestRun(context.Background(), RunConfig{
		Egress: &GuestEgress{Socket: GatewayPrefix + channelEgress, Listen: "127.0.0.1:0", CA: gatewayEgressCA, Env: []string{"GITHUB_TOKEN=" + ph}},
		Argv:   []string{"sh", "-c", curl + ` -sS -H "Authorization: Bearer $GITHUB_TOKEN" ` + srv.URL("api.test") + `/user`},
		Env: []string{"PATH=" + os.Getenv("PATH"), "SSL_CERT_FILE=" + sys,
			EnvCredentials + "=" + s.SandboxEnv()[EnvCredentials]},
		Stdout: &out, Stderr: &out,
	})
	if err != nil || code != 0 {
		t.Fatalf("GuestRun = %d, %v\n%s", code, err, out.String())
	}
	if got := out.String(); !strings.Contains(got, "hello api.test:") || !strings.Contains(got, "valid=true Bearer ****") || strings.Contains(got, egressSecret) {
		t.Errorf("output: %s", got)
	}
	if st, err := os.Stat(guestCredentials); err != nil || st.Mode().Perm() != 0o600 {
		t.Errorf("credentials file: %v %v", st, err)
	}
}
