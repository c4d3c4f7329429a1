package egress

import (
	"crypto/tls"
	"crypto/x509"
	"fmt"
	"io"
	"net"
	"net/http"
	"strconv"
	"sync"
	"time"
)

// helloTimeout bounds how long a terminated tunnel waits for the sandbox's
// first bytes.
const helloTimeout = 30 * time.Second

// recordTypeHandshake is the first byte of a TLS connection.
const recordTypeHandshake = 0x16

// newClientTLS is the proxy's TLS configuration towards hosts: full
// verification against roots (nil: the system's).
func newClientTLS(roots *x509.CertPool) *tls.Config {
	return &tls.Config{RootCAs: roots, MinVersion: tls.VersionTLS12}
}

// terminates reports whether a tunnel to t is terminated: when a secret
// may be sent to t.
func (p *Proxy) terminates(t Target) bool {
	for _, s := range p.secrets {
		if s.applies(t) {
			return true
		}
	}
	return false
}

// innerConn is what the inner server needs of a terminated connection.
type innerConn struct {
	target Target
	raw    net.Conn
}

// terminate answers CONNECT, then serves the tunnel's requests itself over
// TLS with a certificate from the CA. A tunnel that does not start with a
// TLS handshake is passed through untouched (no secret goes into it).
func (p *Proxy) terminate(w http.ResponseWriter, r *http.Request, t Target) {
	client, ok := p.hijack(w)
	if !ok {
		return
	}
	spawned := p.spawn(func() {
		_ = client.SetReadDeadline(time.Now().Add(helloTimeout))
		first, err := client.r.Peek(1)
		_ = client.SetReadDeadline(time.Time{})
		if err != nil {
			p.untrack(client)
			return
		}
		if first[0] != recordTypeHandshake {
			up, err := p.dialContext(p.ctx, "tcp", t.String())
			if err != nil {
				p.log.Warn("bridge egress upstream", "host", t.String(), "err", err)
				if d, ok := err.(*Denial); ok {
					p.report(r, d)
				}
				p.untrack(client)
				return
			}
			if p.track(up) {
				p.tunnel(client, up, t)
			}
			return
		}
		leaf, err := p.cfg.CA.leaf(t)
		if err != nil {
			p.log.Error("bridge egress certificate", "host", t.String(), "err", err)
			p.untrack(client)
			return
		}
		tc := tls.Server(client, &tls.Config{
			Certificates: []tls.Certificate{*leaf},
			NextProtos:   []string{"http/1.1"},
			MinVersion:   tls.VersionTLS12,
		})
		p.innerConn.Store(tc, innerConn{target: t, raw: client})
		if !p.innerLn.push(tc) {
			p.innerConn.Delete(tc)
			p.untrack(client)
		}
	})
	if !spawned {
		p.untrack(client)
	}
}

// serveInner forwards a request made inside a terminated tunnel, to the
// tunnel's host only.
func (p *Proxy) serveInner(w http.ResponseWriter, r *http.Request) {
	t, ok := r.Context().Value(tunnelKey{}).(Target)
	if !ok {
		http.Error(w, "agentbox egress proxy: unknown tunnel", http.StatusInternalServerError)
		return
	}
	host := r.Host
	if host == "" {
		host = t.String()
	}
	if ht, err := ParseTarget(host, t.Port); err != nil || ht != t {
		// A tunnel opened to one host must not carry requests for another
		// (the secret's host check and the allow list were made for t).
		msg := fmt.Sprintf("agentbox egress proxy: this connection was opened (CONNECT) to %s; a request for %q needs its own connection\n", t, host)
		w.Header().Set("Content-Type", "text/plain; charset=utf-8")
		w.Header().Set("Content-Length", strconv.Itoa(len(msg)))
		w.WriteHeader(http.StatusMisdirectedRequest)
		_, _ = io.WriteString(w, msg)
		return
	}
	p.forward(w, r, t, true)
}

// innerState is the inner server's ConnState: a closed connection's raw
// tunnel is released.
func (p *Proxy) innerState(c net.Conn, s http.ConnState) {
	if s != http.StateClosed && s != http.StateHijacked {
		return
	}
	if v, ok := p.innerConn.LoadAndDelete(c); ok {
		p.untrack(v.(innerConn).raw)
	}
}

// chanListener is a net.Listener fed with connections by push.
type chanListener struct {
	ch   chan net.Conn
	done chan struct{}
	once sync.Once
}

func newChanListener() *chanListener {
	return &chanListener{ch: make(chan net.Conn), done: make(chan struct{})}
}

// push hands c to Accept; it reports false when the listener is closed.
func (l *chanListener) push(c net.Conn) bool {
	select {
	case l.ch <- c:
		return true
	case <-l.done:
		return false
	}
}

func (l *chanListener) Accept() (net.Conn, error) {
	select {
	case c := <-l.ch:
		return c, nil
	case <-l.done:
		return nil, net.ErrClosed
	}
}

func (l *chanListener) Close() error {
	l.once.Do(func() { close(l.done) })
	return nil
}

func (l *chanListener) Addr() net.Addr { return chanAddr{} }

type chanAddr struct{}

func (chanAddr) Network() string { return "egress" }
func (chanAddr) String() string  { return "terminated-tunnels" }
