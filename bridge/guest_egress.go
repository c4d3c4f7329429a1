package bridge

import (
	"bytes"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
)

// GuestEgress is the egress side of `agentbox bridge run`: the egress
// socket to serve on loopback, the per-request CA to trust, and the
// secrets' placeholders to set.
type GuestEgress struct {
	// Socket is the host egress socket.
	Socket string
	// Listen is the loopback address to serve it on (a free port of the
	// same IP when it is taken).
	Listen string
	// CA is the PEM file of the proxy's CA ("" without secrets).
	CA string
	// Env are NAME=PLACEHOLDER pairs for the command's environment.
	Env []string
}

// NoProxy is the NO_PROXY list inside the sandbox: its own loopback (where
// the model proxy listens) never goes through the egress proxy.
const NoProxy = "localhost,127.0.0.1,::1"

// The variables `agentbox bridge run` sets for the egress proxy, and the
// copies of the CA's under names no CLI takes for a credential (the Gemini
// CLI keeps variables named like *CERT* from its MCP servers).
var (
	proxyEnv = []string{"HTTP_PROXY", "HTTPS_PROXY", "http_proxy", "https_proxy", "NO_PROXY", "no_proxy", "NODE_USE_ENV_PROXY"}
	rootsEnv = []string{"SSL_CERT_FILE", "CURL_CA_BUNDLE", "GIT_SSL_CAINFO", "REQUESTS_CA_BUNDLE"}
)

const (
	// envEgressRoots holds the trusted-roots bundle (the system's roots
	// and the CA), as rootsEnv do.
	envEgressRoots = "AGENTBOX_EGRESS_ROOTS"
	// envEgressCA holds the CA, as NODE_EXTRA_CA_CERTS does.
	envEgressCA = "AGENTBOX_EGRESS_CA"
)

// systemBundles are where Linux distributions keep the trusted roots (the
// places Go's crypto/x509 looks).
var systemBundles = []string{
	"/etc/ssl/certs/ca-certificates.crt",                // Debian, Ubuntu, Alpine
	"/etc/pki/tls/certs/ca-bundle.crt",                  // Fedora, RHEL
	"/etc/ssl/ca-bundle.pem",                            // openSUSE
	"/etc/pki/tls/cacert.pem",                           // OpenELEC
	"/etc/pki/ca-trust/extracted/pem/tls-ca-bundle.pem", // CentOS, RHEL 7
	"/etc/ssl/cert.pem",                                 // Alpine, macOS
}

// environ returns env with the proxy variables pointing at addr (upper and
// lower case: curl and git read the lower-case ones), the placeholders, and,
// with a CA, a trusted-roots bundle (the system's plus the CA) for every
// TLS stack the agent's tools use. cleanup removes the bundle.
func (e *GuestEgress) environ(env []string, addr string, stderr io.Writer) (_ []string, cleanup func(), err error) {
	cleanup = func() {}
	url := "http://" + addr
	for _, k := range []string{"HTTP_PROXY", "HTTPS_PROXY", "http_proxy", "https_proxy"} {
		env = setEnv(env, k, url)
	}
	env = setEnv(env, "NO_PROXY", NoProxy)
	env = setEnv(env, "no_proxy", NoProxy)
	// Node.js (22.21+) sends fetch and http(s) through the proxy
	// variables only when asked.
	env = setEnv(env, "NODE_USE_ENV_PROXY", "1")
	for _, kv := range e.Env {
		k, v, ok := strings.Cut(kv, "=")
		if !ok || k == "" {
			return nil, cleanup, fmt.Errorf("--setenv %q: want NAME=VALUE", kv)
		}
		env = setEnv(env, k, v)
	}
	if e.CA == "" {
		return env, cleanup, nil
	}
	ca, err := os.ReadFile(e.CA)
	if err != nil {
		return nil, cleanup, fmt.Errorf("egress CA: %w (is it mounted?)", err)
	}
	base := lookupEnv(env, "SSL_CERT_FILE")
	var roots []byte
	for _, p := range append([]string{base}, systemBundles...) {
		if p == "" {
			continue
		}
		if roots, err = os.ReadFile(p); err == nil {
			break
		}
	}
	if len(roots) == 0 && stderr != nil {
		fmt.Fprintln(stderr, "agentbox bridge: no system CA bundle found: only hosts whose TLS the egress proxy terminates will verify")
	}
	dir, err := os.MkdirTemp("", "agentbox-egress-")
	if err != nil {
		return nil, cleanup, fmt.Errorf("egress CA bundle: %w", err)
	}
	cleanup = func() { _ = os.RemoveAll(dir) }
	bundle := filepath.Join(dir, "ca-bundle.pem")
	data := append(bytes.TrimRight(roots, "\n"), '\n')
	if len(roots) == 0 {
		data = nil
	}
	data = append(data, ca...)
	if err := os.WriteFile(bundle, data, 0o644); err != nil {
		cleanup()
		return nil, func() {}, fmt.Errorf("egress CA bundle: %w", err)
	}
	for _, k := range append(rootsEnv, envEgressRoots) {
		env = setEnv(env, k, bundle)
	}
	// Node.js adds these to its own built-in roots.
	env = setEnv(env, "NODE_EXTRA_CA_CERTS", e.CA)
	env = setEnv(env, envEgressCA, e.CA)
	return env, cleanup, nil
}

// lookupEnv returns key's value in env ("" when absent).
func lookupEnv(env []string, key string) string {
	for i := len(env) - 1; i >= 0; i-- {
		if v, ok := strings.CutPrefix(env[i], key+"="); ok {
			return v
		}
	}
	return ""
}
