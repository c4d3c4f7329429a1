package bridge

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"strings"
	"time"
)

// The in-sandbox side of the bridge across the network (gateway.go): a
// "socket" named GatewayPrefix+CHANNEL is reached by dialing the gateway
// with the session's credentials, which the sandbox finds in EnvCredentials
// or, for processes that do not inherit the environment (an MCP server the
// CLI starts with an environment of its own), in GuestCredentials, which
// `agentbox bridge run` writes.

const (
	// GatewayPrefix marks a guest socket reached through the gateway.
	GatewayPrefix = "gateway:"
	// EnvCredentials holds the session's Credentials (JSON, base64).
	EnvCredentials = "AGENTBOX_BRIDGE"
	// GuestCredentials is where `agentbox bridge run` writes them (0600,
	// on the sandbox's memory-backed /tmp).
	GuestCredentials = "/tmp/.agentbox-bridge/credentials"
	// gatewayEgressCA names the egress CA carried in the credentials.
	gatewayEgressCA = GatewayPrefix + "egress-ca"
)

// Credentials are what a sandbox needs to reach its session on the
// gateway: the address, the CA to verify the gateway with, the session's
// client certificate and key, and its token; with secrets, the egress
// proxy's CA too.
type Credentials struct {
	Address  string `json:"address"`
	Token    string `json:"token"`
	CA       string `json:"ca"`
	Cert     string `json:"cert"`
	Key      string `json:"key"`
	EgressCA string `json:"egress_ca,omitempty"`
}

// guestCredentials is GuestCredentials (tests on the host move it).
var guestCredentials = GuestCredentials

// encode is the value of EnvCredentials.
func (c *Credentials) encode() string {
	b, _ := json.Marshal(c)
	return base64.StdEncoding.EncodeToString(b)
}

func decodeCredentials(s string) (*Credentials, error) {
	b, err := base64.StdEncoding.DecodeString(strings.TrimSpace(s))
	if err != nil {
		return nil, fmt.Errorf("bridge credentials: %w", err)
	}
	var c Credentials
	if err := json.Unmarshal(b, &c); err != nil {
		return nil, fmt.Errorf("bridge credentials: %w", err)
	}
	if c.Address == "" || c.Token == "" || c.CA == "" || c.Cert == "" || c.Key == "" {
		return nil, errors.New("bridge credentials: incomplete (want address, token, ca, cert and key)")
	}
	return &c, nil
}

// loadCredentials reads the session's credentials from EnvCredentials, else
// from GuestCredentials.
func loadCredentials() (*Credentials, error) {
	v := os.Getenv(EnvCredentials)
	if v == "" {
		b, err := os.ReadFile(guestCredentials)
		if err != nil {
			return nil, fmt.Errorf("bridge credentials: neither $%s nor %s: %w", EnvCredentials, guestCredentials, err)
		}
		v = string(b)
	}
	return decodeCredentials(v)
}

// writeCredentials saves the environment's credentials in GuestCredentials
// (and the egress CA beside them), for the processes that do not inherit
// the environment. It returns the egress CA's path ("" without one).
func writeCredentials(env []string) (egressCA string, err error) {
	v := lookupEnv(env, EnvCredentials)
	if v == "" {
		return "", nil
	}
	c, err := decodeCredentials(v)
	if err != nil {
		return "", err
	}
	dir := filepath.Dir(guestCredentials)
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return "", fmt.Errorf("bridge credentials: %w", err)
	}
	if err := os.WriteFile(guestCredentials, []byte(v), 0o600); err != nil {
		return "", fmt.Errorf("bridge credentials: %w", err)
	}
	if c.EgressCA == "" {
		return "", nil
	}
	egressCA = filepath.Join(dir, "egress-ca.pem")
	if err := os.WriteFile(egressCA, []byte(c.EgressCA), 0o644); err != nil {
		return "", fmt.Errorf("bridge egress CA: %w", err)
	}
	return egressCA, nil
}

// dialGateway connects to channel on the gateway, retrying briefly while
// it refuses connections.
func dialGateway(ctx context.Context, channel string) (halfCloser, error) {
	c, err := loadCredentials()
	if err != nil {
		return nil, err
	}
	cert, err := tls.X509KeyPair([]byte(c.Cert), []byte(c.Key))
	if err != nil {
		return nil, fmt.Errorf("bridge credentials: %w", err)
	}
	pool := x509.NewCertPool()
	if !pool.AppendCertsFromPEM([]byte(c.CA)) {
		return nil, errors.New("bridge credentials: no CA certificate")
	}
	host, _, err := net.SplitHostPort(c.Address)
	if err != nil {
		return nil, fmt.Errorf("bridge credentials: address %q: %w", c.Address, err)
	}
	d := tls.Dialer{Config: &tls.Config{
		RootCAs:      pool,
		Certificates: []tls.Certificate{cert},
		ServerName:   host,
		MinVersion:   tls.VersionTLS13,
	}}
	ctx, cancel := context.WithTimeout(ctx, 3*dialTimeout)
	defer cancel()
	for {
		conn, err := d.DialContext(ctx, "tcp", c.Address)
		if err == nil {
			tc := conn.(*tls.Conn)
			_ = tc.SetWriteDeadline(time.Now().Add(dialTimeout))
			if _, err := fmt.Fprintf(tc, "%s %s %s\n", gatewayPreamble, channel, c.Token); err != nil {
				tc.Close()
				return nil, fmt.Errorf("bridge gateway %s: %w", c.Address, err)
			}
			_ = tc.SetWriteDeadline(time.Time{})
			return tc, nil
		}
		var opErr *net.OpError
		if !errors.As(err, &opErr) || opErr.Op != "dial" {
			return nil, fmt.Errorf("bridge gateway %s: %w", c.Address, err)
		}
		select {
		case <-ctx.Done():
			return nil, fmt.Errorf("bridge gateway %s: %w (is the server reachable from the sandbox? a NetworkPolicy must allow it)", c.Address, err)
		case <-time.After(100 * time.Millisecond):
		}
	}
}
