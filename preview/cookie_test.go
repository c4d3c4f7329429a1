package preview

import (
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"testing"
)

// TestCookieEmbeddable: on *.localhost (and over HTTPS) the ticket's
// cookie is SameSite=None, Secure and Partitioned, which a browser sends
// to a preview framed in the web app (the desktop); on another domain
// over plain HTTP it is Lax, for a preview in a tab of its own.
func TestCookieEmbeddable(t *testing.T) {
	t.Parallel()
	for _, c := range []struct {
		domain string
		want   []string
		not    []string
	}{
		{"", []string{"SameSite=None", "Secure", "Partitioned", "HttpOnly"}, nil},
		{"previews.example.com", []string{"SameSite=Lax", "HttpOnly"}, []string{"Secure", "Partitioned"}},
	} {
		m, err := New(Config{Domain: c.domain})
		if err != nil {
			t.Fatal(err)
		}
		m.Open(Owner{User: "ann", Chat: "c1"}, loopDialer{}, []Port{{Port: 3000}}).SetListening([]int{3000})
		list := m.List("ann", "c1", &url.URL{Scheme: "http", Host: "127.0.0.1:8080"})
		if len(list) != 1 {
			t.Fatalf("%s: list %+v", c.domain, list)
		}
		u, _ := url.Parse(list[0].URL)
		rec := httptest.NewRecorder()
		req := httptest.NewRequest("GET", list[0].URL, nil)
		req.Host = u.Host
		m.Handler().ServeHTTP(rec, req)
		set := rec.Header().Get("Set-Cookie")
		if rec.Code != http.StatusSeeOther || set == "" {
			t.Fatalf("%s: %d, Set-Cookie %q", c.domain, rec.Code, set)
		}
		for _, w := range c.want {
			if !strings.Contains(set, w) {
				t.Errorf("%s: Set-Cookie %q lacks %s", c.domain, set, w)
			}
		}
		for _, w := range c.not {
			if strings.Contains(set, w) {
				t.Errorf("%s: Set-Cookie %q has %s", c.domain, set, w)
			}
		}
	}
}
