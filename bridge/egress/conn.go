package egress

import (
	"bufio"
	"io"
	"net"
	"sync"
)

// relay copies both ways until both directions are done, half-closing
// each write side at its reader's EOF.
func relay(a, b net.Conn) {
	var wg sync.WaitGroup
	wg.Go(func() {
		_, _ = io.Copy(b, a)
		closeWrite(b)
	})
	_, _ = io.Copy(a, b)
	closeWrite(a)
	wg.Wait()
}

func closeWrite(c net.Conn) {
	if hc, ok := c.(interface{ CloseWrite() error }); ok {
		_ = hc.CloseWrite()
		return
	}
	_ = c.Close()
}

// bufConn is a hijacked connection that first returns what the HTTP
// server had buffered (a client may send its TLS hello right after
// CONNECT).
type bufConn struct {
	net.Conn
	r *bufio.Reader
}

func (c *bufConn) Read(p []byte) (int, error) { return c.r.Read(p) }

// CloseWrite half-closes the connection when it can.
func (c *bufConn) CloseWrite() error {
	if hc, ok := c.Conn.(interface{ CloseWrite() error }); ok {
		return hc.CloseWrite()
	}
	return c.Conn.Close()
}
