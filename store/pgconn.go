package store

import (
	"context"
	"net"
	"syscall"

	"github.com/jackc/pgx/v5/stdlib"
	"golang.org/x/sys/unix"
)

// pingIfStale is the pools' check of a connection taken from the pool:
// ping it (and so drop it, and take another) when the server wrote to it
// or closed it while it sat idle. An idle connection gets nothing else:
// what arrives is a restart's "terminating connection" or a hang-up, and a
// query sent on it would fail. The check is one poll of the socket; a
// connection with nothing pending is used without a round trip.
func pingIfStale(_ context.Context, p stdlib.ShouldPingParams) bool {
	nc := p.Conn.PgConn().Conn()
	if tc, ok := nc.(interface{ NetConn() net.Conn }); ok { // TLS
		nc = tc.NetConn()
	}
	sc, ok := nc.(syscall.Conn)
	if !ok {
		return true
	}
	raw, err := sc.SyscallConn()
	if err != nil {
		return true
	}
	pending := true
	if err := raw.Control(func(fd uintptr) {
		fds := []unix.PollFd{{Fd: int32(fd), Events: unix.POLLIN | unix.POLLRDHUP}}
		n, err := unix.Poll(fds, 0)
		pending = err != nil || n > 0
	}); err != nil {
		return true
	}
	return pending
}
