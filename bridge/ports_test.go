package bridge

import (
	"bufio"
	"context"
	"errors"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"
)

// startPortRelay serves a PortRelay on a Unix socket and runs the guest side
// in this process against it (its loopback is the host's here).
func startPortRelay(t testing.TB, ports []int) *PortRelay {
	t.Helper()
	dir := t.TempDir()
	sock := filepath.Join(dir, "ports.sock")
	ln, err := net.Listen("unix", sock)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	r := newPortRelay(ctx, ln, ports)
	served := make(chan struct{})
	go func() { r.serve(); close(served) }()
	guest := make(chan error, 1)
	go func() { guest <- GuestPorts(ctx, sock, ports) }()
	t.Cleanup(func() {
		cancel()
		_ = r.close()
		<-served
		if err := <-guest; err != nil && !errors.Is(err, context.Canceled) && !strings.Contains(err.Error(), "connect to host socket") {
			t.Errorf("guest: %v", err)
		}
	})
	return r
}

func portOf(t testing.TB, addr string) int {
	_, p, _ := net.SplitHostPort(addr)
	n, err := strconv.Atoi(p)
	if err != nil {
		t.Fatal(err)
	}
	return n
}

func TestPortRelayDialsDeclaredPorts(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.WriteString(w, "hello "+r.URL.Path)
	}))
	defer srv.Close()
	port := portOf(t, srv.Listener.Addr().String())
	// A free port that nothing listens on.
	l, _ := net.Listen("tcp", "127.0.0.1:0")
	closed := portOf(t, l.Addr().String())
	l.Close()
	r := startPortRelay(t, []int{port, closed})

	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	for i := range 3 { // each connection is a pooled one the guest replaces
		c, err := r.Dial(ctx, port)
		if err != nil {
			t.Fatalf("dial %d: %v", i, err)
		}
		if _, err := io.WriteString(c, "GET /x HTTP/1.1\r\nHost: localhost\r\nConnection: close\r\n\r\n"); err != nil {
			t.Fatal(err)
		}
		resp, err := http.ReadResponse(bufio.NewReader(c), nil)
		if err != nil {
			t.Fatal(err)
		}
		body, _ := io.ReadAll(resp.Body)
		c.Close()
		if string(body) != "hello /x" {
			t.Fatalf("body %q", body)
		}
	}
	if _, err := r.Dial(ctx, closed); !errors.Is(err, ErrPortRefused) {
		t.Fatalf("dial a closed port: %v, want ErrPortRefused", err)
	}
	if _, err := r.Dial(ctx, 1); err == nil || !strings.Contains(err.Error(), "not declared") {
		t.Fatalf("dial an undeclared port: %v", err)
	}
	// The guest reports the listening port (and not the closed one).
	got := make(chan []int, 8)
	r.OnListening(func(l []int) { got <- l })
	for {
		if l := r.Listening(); len(l) == 1 && l[0] == port {
			break
		}
		select {
		case <-got:
		case <-ctx.Done():
			t.Fatalf("listening %v, want [%d]", r.Listening(), port)
		}
	}
}

func TestParseProcNetTCP(t *testing.T) {
	table := `  sl  local_address rem_address   st tx_queue rx_queue tr tm->when retrnsmt   uid  timeout inode
   0: 00000000:1F40 00000000:0000 0A 00000000:00000000 00:00000000 00000000  1000        0 1 1 0000000000000000 100 0 0 10 0
   1: 0100007F:A2B8 0100007F:1F40 01 00000000:00000000 00:00000000 00000000  1000        0 2 1 0000000000000000 20 4 30 10 -1
`
	out := map[int]bool{}
	parseProcNetTCP([]byte(table), out)
	if !out[8000] || len(out) != 1 {
		t.Fatalf("got %v, want only 8000 listening", out)
	}
}
