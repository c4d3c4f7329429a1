package egress

import (
	"encoding/base64"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptrace"
	"net/textproto"
	"strings"
	"testing"

	"github.com/agentbox/agentbox/bridge/egress/egresstest"
)

// TestEchoedValueNeverComesBack: a host echoes the credential header every
// way echoBack knows; whatever the sandbox gets back (status, headers,
// informational headers, body, trailers) holds the value in no encoding,
// and the rest of the answer arrives intact.
func TestEchoedValueNeverComesBack(t *testing.T) {
	t.Parallel()
	f := newFixture(t, nil)
	ph := f.secret.Placeholder
	stars := strings.Repeat("*", len(realValue))
	base := "https://api.test:" + f.tlsPort
	for _, path := range []string{"/echo/plain", "/echo/gzip", "/echo/deflate", "/echo/drip", "/echo/trailer", "/echo/early"} {
		for _, auth := range []string{"Bearer " + ph, "Basic " + base64.StdEncoding.EncodeToString([]byte("x-access-token:"+ph)), ph} {
			req, _ := http.NewRequest(http.MethodGet, base+path, nil)
			req.Header.Set("Authorization", auth)
			req.Header.Set("Accept-Encoding", "br, gzip") // the proxy asks for what it can read
			var early []string
			req = req.WithContext(httptrace.WithClientTrace(req.Context(), &httptrace.ClientTrace{
				Got1xxResponse: func(code int, h textproto.MIMEHeader) error {
					early = append(early, fmt.Sprint(code, h))
					return nil
				}}))
			resp, err := f.client().Transport.RoundTrip(req)
			if err != nil {
				t.Fatalf("%s: %v", path, err)
			}
			body, err := io.ReadAll(resp.Body)
			resp.Body.Close()
			if err != nil {
				t.Fatalf("%s: body: %v", path, err)
			}
			var all strings.Builder
			fmt.Fprintln(&all, resp.Status, resp.Header, resp.Trailer, early)
			all.Write(body)
			what := path + " with " + strings.Fields(auth)[0]
			if resp.StatusCode != http.StatusOK || resp.Header.Get("Content-Encoding") != "" {
				t.Errorf("%s: %s, Content-Encoding %q", what, resp.Status, resp.Header.Get("Content-Encoding"))
			}
			if l := egresstest.Leaks(realValue, all.String()); len(l) > 0 {
				t.Errorf("%s: the value came back (%v):\n%s", what, l, all.String())
			}
			if got := last(t, f.seen).Header.Get("Authorization"); !strings.Contains(got+basicCredentials(got), realValue) {
				t.Errorf("%s: the host got %q, not the value", what, got)
			}
			// The rest intact: the JSON echo parses, and says the
			// value was there (masked).
			line, _, _ := strings.Cut(string(body), "\n")
			var echoed struct{ Headers http.Header }
			if err := json.Unmarshal([]byte(line), &echoed); err != nil || !strings.Contains(echoed.Headers.Get("Authorization")+basicCredentials(echoed.Headers.Get("Authorization")), stars) {
				t.Errorf("%s: the echoed JSON %q, %v", what, line, err)
			}
			if path == "/echo/trailer" && !strings.Contains(resp.Trailer.Get("X-Echo-Trailer"), "*****") {
				t.Errorf("%s: trailer %q", what, resp.Trailer)
			}
			if path == "/echo/early" && (len(early) != 1 || !strings.Contains(early[0], "style.css?k=") || !strings.Contains(early[0], "****")) {
				t.Errorf("%s: early hints %q", what, early)
			}
		}
	}

	// A body the proxy cannot read is refused, not passed on.
	resp, body := f.do(t, http.MethodGet, base+"/echo/br", "", http.Header{"Authorization": {"Bearer " + ph}})
	if resp.StatusCode != http.StatusBadGateway || !strings.Contains(body, `Content-Encoding "br", which the proxy cannot decode`) {
		t.Errorf("br body: %d %q", resp.StatusCode, body)
	}

	// A redirect carrying the value: masked in Location; following it, the
	// client sends the other host only the placeholder.
	req, _ := http.NewRequest(http.MethodGet, base+"/echo/redirect?to=plain.test:"+f.tlsPort, nil)
	req.Header.Set("Authorization", "Bearer "+ph)
	resp, err := f.client().Transport.RoundTrip(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	loc := resp.Header.Get("Location")
	if resp.StatusCode != http.StatusFound || len(egresstest.Leaks(realValue, loc)) > 0 || !strings.Contains(loc, "plain.test") {
		t.Fatalf("redirect: %d to %q", resp.StatusCode, loc)
	}
	f.do(t, http.MethodGet, loc, "", http.Header{"Authorization": {"Bearer " + ph}})
	if got := last(t, f.seen); !strings.HasPrefix(got.Host, "plain.test") || got.Header.Get("Authorization") != "Bearer "+ph || strings.Contains(got.URI, realValue) {
		t.Errorf("after the redirect plain.test got %q at %q", got.Header.Get("Authorization"), got.URI)
	}
}

// TestEchoScrubbedOverPlainHTTP: responses over plain HTTP are scrubbed
// too (the value never goes there, but a host may have kept it).
func TestEchoScrubbedOverPlainHTTP(t *testing.T) {
	t.Parallel()
	f := newFixture(t, nil)
	resp, body := f.do(t, http.MethodGet, "http://plain.test:"+f.httpPort+"/echo/gzip", "", http.Header{"X-Stored": {"Bearer " + realValue}})
	if resp.StatusCode != http.StatusOK || len(egresstest.Leaks(realValue, fmt.Sprint(resp.Header)+body)) > 0 || !strings.Contains(body, "Bearer ****") {
		t.Errorf("plain HTTP echo: %d %v\n%s", resp.StatusCode, resp.Header, body)
	}
}
