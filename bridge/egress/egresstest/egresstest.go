// Package egresstest holds test helpers for the egress proxy: a test
// certificate authority, HTTPS servers on loopback that record what they
// are sent, and a git smart-HTTP server (git http-backend behind
// net/http/cgi). The proxy is made to trust the test CA through its
// RootCAs option; nothing here turns verification off.
package egresstest

import (
	"bytes"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"io"
	"log"
	"math/big"
	"net"
	"net/http"
	"net/http/httptest"
	"strconv"
	"sync"
	"testing"
	"time"
)

// PKI is a certificate authority for test servers.
type PKI struct {
	cert *x509.Certificate
	key  *ecdsa.PrivateKey
}

// NewPKI creates a CA valid for an hour.
func NewPKI(tb testing.TB) *PKI {
	tb.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		tb.Fatal(err)
	}
	tmpl := &x509.Certificate{SerialNumber: serial(), Subject: pkix.Name{CommonName: "egress test CA"},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour),
		KeyUsage: x509.KeyUsageCertSign, BasicConstraintsValid: true, IsCA: true}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		tb.Fatal(err)
	}
	cert, err := x509.ParseCertificate(der)
	if err != nil {
		tb.Fatal(err)
	}
	return &PKI{cert: cert, key: key}
}

// Pool is a cert pool holding the CA only.
func (p *PKI) Pool() *x509.CertPool {
	pool := x509.NewCertPool()
	pool.AddCert(p.cert)
	return pool
}

// CertPEM is the CA certificate in PEM.
func (p *PKI) CertPEM() []byte {
	return pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: p.cert.Raw})
}

// ServerCert is a certificate for the names, signed by the CA.
func (p *PKI) ServerCert(tb testing.TB, names ...string) tls.Certificate {
	tb.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		tb.Fatal(err)
	}
	tmpl := &x509.Certificate{SerialNumber: serial(), Subject: pkix.Name{CommonName: names[0]}, DNSNames: names,
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour),
		KeyUsage: x509.KeyUsageDigitalSignature, ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth}}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, p.cert, &key.PublicKey, p.key)
	if err != nil {
		tb.Fatal(err)
	}
	return tls.Certificate{Certificate: [][]byte{der, p.cert.Raw}, PrivateKey: key}
}

func serial() *big.Int {
	b := make([]byte, 16)
	_, _ = rand.Read(b)
	b[0] &= 0x7f
	return new(big.Int).SetBytes(b)
}

// Request is what a test server received.
type Request struct {
	Method string
	// Host is the Host header.
	Host   string
	URI    string
	Header http.Header
	Body   string
	TLS    bool
}

// Recorder keeps the requests a handler saw. Safe for concurrent use.
type Recorder struct {
	mu   sync.Mutex
	reqs []Request
}

// Wrap records each request (its body read up to 1 MiB and given back to
// next) before next handles it.
func (r *Recorder) Wrap(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
		body, _ := io.ReadAll(io.LimitReader(req.Body, 1<<20))
		r.mu.Lock()
		r.reqs = append(r.reqs, Request{Method: req.Method, Host: req.Host, URI: req.RequestURI,
			Header: req.Header.Clone(), Body: string(body), TLS: req.TLS != nil})
		r.mu.Unlock()
		req.Body = io.NopCloser(io.MultiReader(bytes.NewReader(body), req.Body))
		next.ServeHTTP(w, req)
	})
}

// Requests returns a copy of the requests so far.
func (r *Recorder) Requests() []Request {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]Request(nil), r.reqs...)
}

// Server is an HTTPS server on 127.0.0.1 with a certificate for its names
// from the test CA, recording every request.
type Server struct {
	*Recorder
	// Port is the port it listens on.
	Port int
	srv  *httptest.Server
}

// NewServer starts h on 127.0.0.1 over TLS for names; it stops at the end
// of the test.
func NewServer(tb testing.TB, pki *PKI, h http.Handler, names ...string) *Server {
	tb.Helper()
	s := &Server{Recorder: &Recorder{}}
	s.srv = httptest.NewUnstartedServer(s.Wrap(h))
	s.srv.TLS = &tls.Config{Certificates: []tls.Certificate{pki.ServerCert(tb, names...)}}
	s.srv.Config.ErrorLog = log.New(io.Discard, "", 0) // refused handshakes are part of the tests
	s.srv.StartTLS()
	tb.Cleanup(s.srv.Close)
	_, port, _ := net.SplitHostPort(s.srv.Listener.Addr().String())
	s.Port, _ = strconv.Atoi(port)
	return s
}

// Addr is "name:port" for one of the server's names.
func (s *Server) Addr(name string) string { return name + ":" + strconv.Itoa(s.Port) }

// URL is "https://name:port" for one of the server's names.
func (s *Server) URL(name string) string { return "https://" + s.Addr(name) }
