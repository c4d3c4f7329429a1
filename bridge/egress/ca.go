package egress

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"errors"
	"fmt"
	"math/big"
	"net"
	"sync"
	"time"
)

// CA is a per-request certificate authority: an ECDSA P-256 key that
// never leaves the host process, a certificate the sandbox is told to
// trust, and the leaf certificates it signs for the hosts whose TLS the
// proxy terminates. Its certificate is name-constrained to those hosts, so
// even a leaked key could not vouch for any other. Safe for concurrent
// use.
type CA struct {
	cert     *x509.Certificate
	key      *ecdsa.PrivateKey
	pem      []byte
	notAfter time.Time

	leafKey *ecdsa.PrivateKey
	mu      sync.Mutex
	leaves  map[string]*tls.Certificate
}

// NewCA creates a CA valid from a minute ago until notAfter, allowed to
// sign only for names and addresses that the rules match.
func NewCA(rules []Rule, notAfter time.Time) (*CA, error) {
	if len(rules) == 0 {
		return nil, errors.New("egress CA: no hosts to sign for")
	}
	now := time.Now()
	if !notAfter.After(now) {
		return nil, errors.New("egress CA: its end of validity has passed")
	}
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return nil, fmt.Errorf("egress CA key: %w", err)
	}
	leafKey, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return nil, fmt.Errorf("egress CA leaf key: %w", err)
	}
	var dns []string
	var ips []*net.IPNet
	for _, r := range rules {
		switch {
		case r.IP.IsValid():
			bits := r.IP.BitLen()
			ips = append(ips, &net.IPNet{IP: r.IP.AsSlice(), Mask: net.CIDRMask(bits, bits)})
		default:
			// A DNS constraint covers the name and every name below it,
			// which is what "*.example.com" needs (and a little more).
			dns = append(dns, r.Host)
		}
	}
	// An empty list would leave that kind of name unconstrained: permit
	// only a name and an address that can never be asked for.
	if len(dns) == 0 {
		dns = []string{"invalid"}
	}
	if len(ips) == 0 {
		ips = []*net.IPNet{{IP: net.IPv4zero.To4(), Mask: net.CIDRMask(32, 32)}}
	}
	tmpl := &x509.Certificate{
		SerialNumber:          serial(),
		Subject:               pkix.Name{CommonName: "agentbox egress proxy (per request)", Organization: []string{"agentbox"}},
		NotBefore:             now.Add(-time.Minute),
		NotAfter:              notAfter,
		KeyUsage:              x509.KeyUsageCertSign | x509.KeyUsageCRLSign,
		BasicConstraintsValid: true,
		IsCA:                  true,
		MaxPathLenZero:        true,
		PermittedDNSDomains:   dns,
		PermittedIPRanges:     ips,
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		return nil, fmt.Errorf("egress CA certificate: %w", err)
	}
	cert, err := x509.ParseCertificate(der)
	if err != nil {
		return nil, fmt.Errorf("egress CA certificate: %w", err)
	}
	return &CA{
		cert: cert, key: key, notAfter: notAfter, leafKey: leafKey,
		pem:    pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}),
		leaves: map[string]*tls.Certificate{},
	}, nil
}

// CertPEM is the CA certificate in PEM, for the sandbox to trust.
func (c *CA) CertPEM() []byte { return c.pem }

// Certificate is the CA certificate.
func (c *CA) Certificate() *x509.Certificate { return c.cert }

// leaf returns a certificate for t's name or address, signed by the CA
// (made once per name and kept for the CA's life).
func (c *CA) leaf(t Target) (*tls.Certificate, error) {
	name := t.Name()
	c.mu.Lock()
	defer c.mu.Unlock()
	if l, ok := c.leaves[name]; ok {
		return l, nil
	}
	tmpl := &x509.Certificate{
		SerialNumber: serial(),
		Subject:      pkix.Name{CommonName: name},
		NotBefore:    time.Now().Add(-time.Minute),
		NotAfter:     c.notAfter,
		KeyUsage:     x509.KeyUsageDigitalSignature,
		ExtKeyUsage:  []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
	}
	if t.IP.IsValid() {
		tmpl.IPAddresses = []net.IP{t.IP.AsSlice()}
	} else {
		tmpl.DNSNames = []string{t.Host}
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, c.cert, &c.leafKey.PublicKey, c.key)
	if err != nil {
		return nil, fmt.Errorf("egress leaf certificate for %s: %w", name, err)
	}
	l := &tls.Certificate{Certificate: [][]byte{der, c.cert.Raw}, PrivateKey: c.leafKey}
	c.leaves[name] = l
	return l, nil
}

// serial is a random 128-bit certificate serial number.
func serial() *big.Int {
	b := make([]byte, 16)
	_, _ = rand.Read(b) // crypto/rand.Read never fails (Go 1.24+)
	b[0] &= 0x7f
	return new(big.Int).SetBytes(b)
}
