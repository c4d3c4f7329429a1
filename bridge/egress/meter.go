package egress

import (
	"net"
	"slices"
	"strings"
	"sync"
	"sync/atomic"

	"github.com/agentbox/agentbox/chat"
)

// meter counts requests and bytes per host. It is safe for concurrent use.
type meter struct {
	mu    sync.Mutex
	hosts map[string]*hostCount
}

// hostCount is one host's counters, updated without the meter's lock.
type hostCount struct {
	requests, denied, sent, received atomic.Int64
}

func (m *meter) host(key string) *hostCount {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.hosts == nil {
		m.hosts = map[string]*hostCount{}
	}
	h, ok := m.hosts[key]
	if !ok {
		h = &hostCount{}
		m.hosts[key] = h
	}
	return h
}

// usage returns the counts so far, sorted by host.
func (m *meter) usage() []chat.HostUsage {
	m.mu.Lock()
	defer m.mu.Unlock()
	out := make([]chat.HostUsage, 0, len(m.hosts))
	for k, h := range m.hosts {
		out = append(out, chat.HostUsage{Host: k, Requests: h.requests.Load(), Denied: h.denied.Load(),
			BytesSent: h.sent.Load(), BytesReceived: h.received.Load()})
	}
	slices.SortFunc(out, func(a, b chat.HostUsage) int { return strings.Compare(a.Host, b.Host) })
	return out
}

// countingConn counts the bytes of a connection to a host.
type countingConn struct {
	net.Conn
	h *hostCount
}

func (c *countingConn) Read(p []byte) (int, error) {
	n, err := c.Conn.Read(p)
	c.h.received.Add(int64(n))
	return n, err
}

func (c *countingConn) Write(p []byte) (int, error) {
	n, err := c.Conn.Write(p)
	c.h.sent.Add(int64(n))
	return n, err
}

// CloseWrite half-closes the connection when it can (a TCP connection).
func (c *countingConn) CloseWrite() error {
	if hc, ok := c.Conn.(interface{ CloseWrite() error }); ok {
		return hc.CloseWrite()
	}
	return nil
}
