package preview

import (
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/cookiejar"
	"net/http/httptest"
	"net/url"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/coder/websocket"
)

// loopDialer dials the test's servers on loopback, as the bridge's port
// relay dials them in a sandbox.
type loopDialer struct{}

func (loopDialer) Dial(ctx context.Context, port int) (net.Conn, error) {
	var d net.Dialer
	c, err := d.DialContext(ctx, "tcp", net.JoinHostPort("127.0.0.1", strconv.Itoa(port)))
	if err != nil {
		return nil, fmt.Errorf("%w: %v", ErrNotListening, err)
	}
	return c, nil
}

// app is the app in the "sandbox": it echoes the Host and path it got and
// the cookies, and echoes WebSocket messages.
func app(t *testing.T) int {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/ws" {
			c, err := websocket.Accept(w, r, nil)
			if err != nil {
				return
			}
			defer c.CloseNow()
			for {
				typ, b, err := c.Read(r.Context())
				if err != nil {
					return
				}
				if err := c.Write(r.Context(), typ, b); err != nil {
					return
				}
			}
		}
		if r.URL.Path == "/upload" {
			n, _ := io.Copy(io.Discard, r.Body)
			fmt.Fprintf(w, "%d", n)
			return
		}
		fmt.Fprintf(w, "host=%s path=%s cookie=%q", r.Host, r.URL.RequestURI(), r.Header.Get("Cookie"))
	}))
	t.Cleanup(srv.Close)
	_, p, _ := net.SplitHostPort(srv.Listener.Addr().String())
	n, _ := strconv.Atoi(p)
	return n
}

// client is a browser-like client: it resolves every host to the test
// server and keeps cookies.
func client(t testing.TB, srv *httptest.Server) *http.Client {
	jar, _ := cookiejar.New(nil)
	addr := srv.Listener.Addr().String()
	return &http.Client{Jar: jar, Transport: &http.Transport{
		DialContext: func(ctx context.Context, network, _ string) (net.Conn, error) {
			var d net.Dialer
			return d.DialContext(ctx, network, addr)
		},
	}}
}

func get(t *testing.T, c *http.Client, u string) (int, string) {
	t.Helper()
	resp, err := c.Get(u)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b)
}

func TestPreview(t *testing.T) {
	m, err := New(Config{})
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(m.Handler())
	defer srv.Close()
	port := app(t)
	l, _ := net.Listen("tcp", "127.0.0.1:0")
	_, closedP, _ := net.SplitHostPort(l.Addr().String())
	l.Close()
	closed, _ := strconv.Atoi(closedP)

	sb := m.Open(Owner{User: "ann", Chat: "c1"}, loopDialer{}, []Port{{Port: port, Label: "web"}, {Port: closed}})
	sb.SetListening([]int{port})
	base, _ := url.Parse(srv.URL)
	list := m.List("ann", "c1", base)
	if len(list) != 2 || list[0].State != StateListening || list[1].State != StateWaiting {
		t.Fatalf("list %+v", list)
	}
	if got := m.List("bob", "c1", base); len(got) != 0 {
		t.Fatalf("another user lists %+v", got)
	}
	u, _ := url.Parse(list[0].URL)
	if !strings.HasSuffix(u.Hostname(), "."+DefaultDomain) || u.Port() != base.Port() {
		t.Fatalf("url %s", u)
	}
	origin := u.Scheme + "://" + u.Host

	t.Run("ticket becomes a cookie", func(t *testing.T) {
		c := client(t, srv)
		u2 := *u
		u2.Path = "/deep/path"
		q := u2.Query()
		q.Set("x", "1")
		u2.RawQuery = q.Encode()
		code, body := get(t, c, u2.String())
		if code != 200 || !strings.Contains(body, fmt.Sprintf("host=localhost:%d path=/deep/path?x=1 cookie=\"\"", port)) {
			t.Fatalf("%d %s", code, body)
		}
		// Later requests carry only the cookie, which the app never sees.
		code, body = get(t, c, origin+"/again")
		if code != 200 || !strings.Contains(body, "path=/again cookie=\"\"") {
			t.Fatalf("%d %s", code, body)
		}
		// A large body streams through.
		resp, err := c.Post(origin+"/upload", "application/octet-stream", io.LimitReader(zeros{}, 64<<20))
		if err != nil {
			t.Fatal(err)
		}
		b, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if string(b) != strconv.Itoa(64<<20) {
			t.Fatalf("upload: %s", b)
		}
		// WebSocket with the cookie.
		ctx := context.Background()
		ws, _, err := websocket.Dial(ctx, "ws"+strings.TrimPrefix(origin, "http")+"/ws", &websocket.DialOptions{HTTPClient: c})
		if err != nil {
			t.Fatal(err)
		}
		defer ws.CloseNow()
		if err := ws.Write(ctx, websocket.MessageText, []byte("ping")); err != nil {
			t.Fatal(err)
		}
		if _, b, err := ws.Read(ctx); err != nil || string(b) != "ping" {
			t.Fatalf("echo %q %v", b, err)
		}
	})
	t.Run("origin without a request", func(t *testing.T) {
		m.SetOrigin(base)
		got := m.List("ann", "c1", nil)
		if len(got) != 2 {
			t.Fatalf("list %+v", got)
		}
		if nu, _ := url.Parse(got[0].URL); nu.Host != u.Host {
			t.Fatalf("URL %s without a base, want host %s (SetOrigin's port)", got[0].URL, u.Host)
		}
	})
	t.Run("URL of a port at a path", func(t *testing.T) {
		pu, err := m.URL("ann", "c1", port, "/deep?x=1", base)
		if err != nil {
			t.Fatal(err)
		}
		if code, body := get(t, client(t, srv), pu); code != 200 || !strings.Contains(body, "path=/deep?x=1 ") {
			t.Fatalf("%s: %d %s", pu, code, body)
		}
		if _, err := m.URL("ann", "c1", 1, "", base); err == nil {
			t.Error("an undeclared port has a URL")
		}
		if _, err := m.URL("bob", "c1", port, "", base); err == nil {
			t.Error("another user's chat has a URL")
		}
	})
	t.Run("refused", func(t *testing.T) {
		c := client(t, srv)
		if code, _ := get(t, c, origin+"/"); code != http.StatusForbidden {
			t.Fatalf("no cookie: %d", code)
		}
		bad := *u
		q := bad.Query()
		q.Set(TicketParam, q.Get(TicketParam)+"x")
		bad.RawQuery = q.Encode()
		if code, _ := get(t, c, bad.String()); code != http.StatusForbidden {
			t.Fatalf("bad ticket: %d", code)
		}
		// A ticket of another preview (the other port's) does not open this one.
		other, _ := url.Parse(list[1].URL)
		mixed := *u
		mixed.RawQuery = other.RawQuery
		if code, _ := get(t, c, mixed.String()); code != http.StatusForbidden {
			t.Fatalf("other preview's ticket: %d", code)
		}
		// Bob's ticket for his own chat's preview is not a key to Ann's.
		bsb := m.Open(Owner{User: "bob", Chat: "c9"}, loopDialer{}, []Port{{Port: port}})
		defer bsb.End("test")
		bobURL, _ := url.Parse(m.List("bob", "c9", base)[0].URL)
		stolen := *u
		stolen.RawQuery = bobURL.RawQuery
		if code, _ := get(t, c, stolen.String()); code != http.StatusForbidden {
			t.Fatalf("bob's ticket on ann's preview: %d", code)
		}
		// An expired ticket.
		exp := *u
		exp.RawQuery = url.Values{TicketParam: {m.sign(tokenOf(t, m, u), "ann", time.Unix(1000, 0))}}.Encode()
		if code, body := get(t, c, exp.String()); code != http.StatusForbidden || !strings.Contains(body, "expired") {
			t.Fatalf("expired ticket: %d %s", code, body)
		}
		// A host that is no preview.
		if code, _ := get(t, c, "http://nosuchtoken."+DefaultDomain+":"+base.Port()+"/"); code != http.StatusNotFound {
			t.Fatalf("unknown token: %d", code)
		}
	})
	t.Run("not listening", func(t *testing.T) {
		c := client(t, srv)
		code, body := get(t, c, list[1].URL)
		if code != http.StatusBadGateway || !strings.Contains(body, "Nothing listens") {
			t.Fatalf("%d %s", code, body)
		}
	})
	t.Run("ended", func(t *testing.T) {
		c := client(t, srv)
		if code, _ := get(t, c, list[0].URL); code != 200 {
			t.Fatalf("before: %d", code)
		}
		done, why := m.Ended("ann", "c1")
		select {
		case <-done:
			t.Fatal("Ended's channel closed while the sandbox lives")
		default:
		}
		if nd, _ := m.Ended("bob", "c1"); nd != nil {
			t.Error("Ended of a chat without previews is not nil")
		}
		sb.End("the chat's sandbox stopped")
		<-done
		if why() != "the chat's sandbox stopped" {
			t.Errorf("why %q", why())
		}
		code, body := get(t, c, origin+"/")
		if code != http.StatusGone || !strings.Contains(body, "Preview ended") {
			t.Fatalf("after: %d %s", code, body)
		}
		if got := m.List("ann", "c1", base); len(got) != 0 {
			t.Fatalf("ended sandbox lists %+v", got)
		}
	})
}

func tokenOf(t *testing.T, m *Manager, u *url.URL) string {
	tok, ok := m.tokenOf(u.Host)
	if !ok {
		t.Fatalf("no token in %s", u)
	}
	return tok
}

type zeros struct{}

func (zeros) Read(p []byte) (int, error) {
	clear(p)
	return len(p), nil
}

func TestNewRefusesBadDomain(t *testing.T) {
	for _, d := range []string{"*.example.com", ".example.com", "a/b"} {
		if _, err := New(Config{Domain: d}); err == nil {
			t.Errorf("domain %q accepted", d)
		}
	}
	if _, err := New(Config{Domain: "previews.example.com:8443"}); err != nil {
		t.Error(err)
	}
}
