package bridge

import (
	"bytes"
	"context"
	"fmt"
	"net/http"
	"net/netip"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"golang.org/x/net/http/httpproxy"

	"github.com/agentbox/agentbox/bridge/egress"
	"github.com/agentbox/agentbox/bridge/egress/egresstest"
	"github.com/agentbox/agentbox/internal/testenv"
	"github.com/agentbox/agentbox/sandbox"
	"github.com/agentbox/agentbox/sandbox/local"
)

const egressSecret = "ghp_real-egress-secret-0c7e1a"

func mustRule(t testing.TB, s string) egress.Rule {
	t.Helper()
	r, err := egress.ParseRule(s)
	if err != nil {
		t.Fatal(err)
	}
	return r
}

// TestEgressSessionWithCurl runs curl through the session's egress proxy
// the way the CLI's tools run in a sandbox: `agentbox bridge run` (here
// GuestRun, on the host) serves the egress socket on loopback and sets the
// proxy variables, the placeholder and the CA bundle.
func TestEgressSessionWithCurl(t *testing.T) {
	curl := testenv.Tool(t, "curl")
	pki := egresstest.NewPKI(t)
	srv := egresstest.NewServer(t, pki, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Write([]byte("hello " + r.Host + "\n"))
	}), "api.test", "plain.test")
	loop := netip.MustParseAddr("127.0.0.1")
	var mu sync.Mutex
	var denied []*egress.Denial
	s := startSession(t, Options{Egress: &EgressOptions{
		Policy: egress.Policy{
			Allow: []egress.Rule{mustRule(t, srv.Addr("api.test")), mustRule(t, srv.Addr("plain.test"))},
			Hosts: map[string]netip.Addr{"api.test": loop, "plain.test": loop},
		},
		Secrets: []egress.Secret{{Name: "GITHUB_TOKEN", Value: egressSecret, Hosts: []egress.Rule{mustRule(t, srv.Addr("api.test"))}}},
		RootCAs: pki.Pool(),
		OnDeny: func(d *egress.Denial) {
			mu.Lock()
			denied = append(denied, d)
			mu.Unlock()
		},
	}})

	// What the sandbox is given: the socket and the CA mounted, the
	// placeholder (never the value) in argv.
	var targets []string
	for _, m := range s.Mounts() {
		targets = append(targets, m.Target)
	}
	if !strings.Contains(strings.Join(targets, " "), GuestEgressSocket) || !strings.Contains(strings.Join(targets, " "), GuestEgressCA) {
		t.Errorf("mounts: %v", targets)
	}
	ph := s.Placeholders()["GITHUB_TOKEN"]
	argv := strings.Join(s.WrapCommand([]string{"claude"}), " ")
	if ph == "" || !strings.Contains(argv, "--setenv GITHUB_TOKEN="+ph) || strings.Contains(argv, egressSecret) ||
		!strings.Contains(argv, "--socket  --egress-socket") {
		t.Errorf("argv: %s", argv)
	}

	// The test servers' CA stands in for the system's roots.
	sys := filepath.Join(t.TempDir(), "system.pem")
	if err := os.WriteFile(sys, pki.CertPEM(), 0o644); err != nil {
		t.Fatal(err)
	}
	script := `env | grep -E '^(HTTPS?_PROXY|https?_proxy|NO_PROXY|GITHUB_TOKEN|SSL_CERT_FILE|NODE_EXTRA_CA_CERTS|GIT_SSL_CAINFO|REQUESTS_CA_BUNDLE|CURL_CA_BUNDLE|NODE_USE_ENV_PROXY)=' | sort
		echo "--- secret host"; ` + curl + ` -sS -H "Authorization: Bearer $GITHUB_TOKEN" ` + srv.URL("api.test") + `/user
		echo "--- other host"; ` + curl + ` -sS -H "Authorization: Bearer $GITHUB_TOKEN" ` + srv.URL("plain.test") + `/
		echo "--- denied"; ` + curl + ` -sS http://denied.test/ ; ` + curl + ` -sS https://denied.test/ 2>&1; true`
	var out bytes.Buffer
	code, err := GuestRun(context.Background(), RunConfig{
		Egress: &GuestEgress{Socket: filepath.Join(s.Dir(), "egress.sock"), Listen: "127.0.0.1:0",
			CA: filepath.Join(s.Dir(), "egress-ca.pem"), Env: []string{"GITHUB_TOKEN=" + ph}},
		Argv:   []string{"sh", "-c", script},
		Env:    []string{"PATH=" + os.Getenv("PATH"), "SSL_CERT_FILE=" + sys, "HTTPS_PROXY=http://wrong"},
		Stdout: &out, Stderr: &out,
	})
	got := out.String()
	if err != nil || code != 0 {
		t.Fatalf("GuestRun = %d, %v\n%s", code, err, got)
	}
	t.Logf("inside:\n%s", got)
	env := map[string]string{}
	for _, line := range strings.Split(got, "\n") {
		if k, v, ok := strings.Cut(line, "="); ok && !strings.Contains(k, " ") {
			env[k] = v
		}
	}
	for _, want := range []string{"hello api.test:", "hello plain.test:", "host: denied.test:80", "not in this sandbox's network allow list",
		"CONNECT tunnel failed, response 403"} {
		if !strings.Contains(got, want) {
			t.Errorf("output lacks %q", want)
		}
	}
	if strings.Contains(got, egressSecret) {
		t.Error("the real value reached the sandbox's side")
	}
	if env["GITHUB_TOKEN"] != ph || env["HTTPS_PROXY"] == "http://wrong" || env["https_proxy"] != env["HTTPS_PROXY"] ||
		env["NODE_EXTRA_CA_CERTS"] == "" || env["SSL_CERT_FILE"] == sys || env["GIT_SSL_CAINFO"] != env["SSL_CERT_FILE"] || env["NODE_USE_ENV_PROXY"] != "1" {
		t.Errorf("environment: %v", env)
	}
	// NO_PROXY keeps the sandbox's loopback (the model proxy) direct, and
	// sends everything else through the egress proxy.
	pf := (&httpproxy.Config{HTTPProxy: env["HTTP_PROXY"], HTTPSProxy: env["HTTPS_PROXY"], NoProxy: env["NO_PROXY"]}).ProxyFunc()
	for _, tt := range []struct {
		u      string
		direct bool
	}{{"http://" + GuestProxyAddr + "/v1/messages", true}, {"http://localhost:3000/", true}, {"https://api.github.com/", false}, {"http://registry.npmjs.org/", false}} {
		u, _ := url.Parse(tt.u)
		p, err := pf(u)
		if err != nil || (p == nil) != tt.direct {
			t.Errorf("%s: proxy %v, %v; want direct=%v", tt.u, p, err, tt.direct)
		}
	}

	// The host got the value, the other host the placeholder.
	for _, r := range srv.Requests() {
		want := "Bearer " + ph
		if strings.HasPrefix(r.Host, "api.test") {
			want = "Bearer " + egressSecret
		}
		if r.Header.Get("Authorization") != want {
			t.Errorf("%s got Authorization %q, want %q", r.Host, r.Header.Get("Authorization"), want)
		}
	}
	use := map[string]int64{}
	for _, u := range s.EgressUsage() {
		use[u.Host] = u.Requests*100 + u.Denied
	}
	if use[srv.Addr("api.test")] != 100 || use[srv.Addr("plain.test")] != 100 || use["denied.test:80"] != 1 || use["denied.test:443"] != 1 {
		t.Errorf("usage: %+v", s.EgressUsage())
	}
	mu.Lock()
	defer mu.Unlock()
	if len(denied) != 2 {
		t.Errorf("denials reported: %v", denied)
	}
}

// TestEgressInLocalSandbox runs `agentbox bridge run` with the session's
// egress flags in a bubblewrap sandbox (the local runtime, network "none"):
// the mounted socket and CA work there as in Docker.
func TestEgressInLocalSandbox(t *testing.T) {
	if testing.Short() {
		t.Skip("-short: starts a sandbox")
	}
	testenv.Bwrap(t)
	curl := testenv.Tool(t, "curl")
	// The sandbox user must reach the binary: a copy in a folder it may
	// enter.
	binDir := shortTempDir(t)
	if err := os.Chmod(binDir, 0o755); err != nil {
		t.Fatal(err)
	}
	bin := filepath.Join(binDir, "agentbox")
	if err := os.WriteFile(bin, mustRead(t, testenv.Agentbox(t)), 0o755); err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	rt, err := local.New(local.Options{})
	if err != nil {
		testenv.Missing(t, "a working bubblewrap: "+err.Error())
	}
	pki := egresstest.NewPKI(t)
	srv := egresstest.NewServer(t, pki, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		// The host checks the value and echoes it, as a careless API might.
		fmt.Fprintf(w, "valid=%v auth=%s\n", r.Header.Get("Authorization") == "Bearer "+egressSecret, r.Header.Get("Authorization"))
	}), "api.test")
	s := startSession(t, Options{Binary: bin, Egress: &EgressOptions{
		Policy:  egress.Policy{Allow: []egress.Rule{mustRule(t, srv.Addr("api.test"))}, Hosts: map[string]netip.Addr{"api.test": netip.MustParseAddr("127.0.0.1")}},
		Secrets: []egress.Secret{{Name: "GITHUB_TOKEN", Value: egressSecret, Hosts: []egress.Rule{mustRule(t, srv.Addr("api.test"))}}},
		RootCAs: pki.Pool(),
	}})
	root := shortTempDir(t)
	uid := -1
	if os.Geteuid() == 0 {
		uid = 1000
	}
	if err := os.Chmod(root, 0o755); err != nil {
		t.Fatal(err)
	}
	wss, err := sandbox.NewWorkspaces(root, uid, uid)
	if err != nil {
		t.Fatal(err)
	}
	ws, release, err := wss.Acquire(ctx, "u1", "c1")
	if err != nil {
		t.Fatal(err)
	}
	defer release()
	sb, err := rt.Create(ctx, sandbox.Spec{UserID: "u1", ChatID: "c1", Workspace: ws, Network: sandbox.NetworkNone, Mounts: s.Mounts()})
	if err != nil {
		t.Fatal(err)
	}
	defer sb.Remove(ctx)
	argv := s.WrapCommand([]string{"sh", "-c", curl + ` -sS -H "Authorization: Bearer $GITHUB_TOKEN" ` + srv.URL("api.test") + `/; echo "env: $GITHUB_TOKEN"`})
	res, err := sb.Exec(ctx, sandbox.ExecRequest{Argv: argv, Timeout: 30 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	if res.ExitCode != 0 || !strings.Contains(res.Stdout, "valid=true auth=Bearer ****") || strings.Contains(res.Stdout, egressSecret) ||
		!strings.Contains(res.Stdout, "env: agentbox-placeholder-GITHUB_TOKEN-") {
		t.Errorf("exit %d\nstdout %s\nstderr %s", res.ExitCode, res.Stdout, res.Stderr)
	}
}
