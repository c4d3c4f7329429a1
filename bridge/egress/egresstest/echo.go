package egresstest

import (
	"bytes"
	"compress/gzip"
	"compress/zlib"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"html"
	"io"
	"net/http"
	"net/url"
	"regexp"
	"strings"
)

// This file is the other side of the egress proxy's promise that a
// secret's value never comes back into the sandbox: a host that echoes what
// it is sent every way a real one might, and a detector of the value in
// any of those encodings.

// Echo is a host that shows the sandbox what it was sent, in every way
// a real one might (httpbin, error pages, debugging endpoints): each
// request header echoed in response headers and in the body as JSON, and
// the credential header as itself, decoded from Basic, base64 (both
// alphabets, with and without padding, after prefixes of each alignment),
// hex, URL, JSON, JavaScript and HTML escapes. The path picks how the body
// travels: gzip or deflate whatever was asked, one byte per chunk, in a
// trailer, in a 103 Early Hints, in a redirect, or as br (which the proxy
// cannot read).
func Echo(w http.ResponseWriter, r *http.Request) {
	auth := r.Header.Get("Authorization")
	if cred, err := base64.StdEncoding.DecodeString(strings.TrimPrefix(auth, "Basic ")); err == nil {
		auth += " decoded=" + string(cred)
	}
	for k, vs := range r.Header {
		w.Header()["X-Echo-"+k] = vs
	}
	w.Header().Set("X-Echo-Base64", base64.StdEncoding.EncodeToString([]byte(auth)))
	var b bytes.Buffer
	j, _ := json.Marshal(map[string]any{"headers": r.Header, "url": r.URL.String()})
	b.Write(j)
	b.WriteString("\n")
	for _, pre := range []string{"", "a", "ab", "user:"} {
		for _, enc := range []*base64.Encoding{base64.StdEncoding, base64.URLEncoding, base64.RawStdEncoding, base64.RawURLEncoding} {
			b.WriteString(enc.EncodeToString([]byte(pre+auth)) + "\n")
		}
	}
	b.WriteString(hex.EncodeToString([]byte(auth)) + "\n" + strings.ToUpper(hex.EncodeToString([]byte(auth))) + "\n")
	b.WriteString(url.QueryEscape(auth) + "\n" + html.EscapeString("<"+auth+">") + "\n")
	for _, f := range []string{`\u%04x`, `\x%02x`, "&#%d;", "&#x%x;", "%%%02X"} {
		for i := 0; i < len(auth); i++ {
			fmt.Fprintf(&b, f, auth[i])
		}
		b.WriteString("\n")
	}
	body := b.Bytes()

	compressed := func(coding string, zw io.WriteCloser, z *bytes.Buffer) {
		zw.Write(body)
		zw.Close()
		w.Header().Set("Content-Encoding", coding)
		w.Write(z.Bytes())
	}
	var z bytes.Buffer
	switch r.URL.Path {
	case "/echo/gzip":
		compressed("gzip", gzip.NewWriter(&z), &z)
	case "/echo/deflate":
		compressed("deflate", zlib.NewWriter(&z), &z)
	case "/echo/br":
		w.Header().Set("Content-Encoding", "br")
		w.Write(body)
	case "/echo/drip":
		rc := http.NewResponseController(w)
		for i := range body {
			w.Write(body[i : i+1])
			rc.Flush()
		}
	case "/echo/trailer":
		w.Header().Set("Trailer", "X-Echo-Trailer")
		w.Write(body)
		w.Header().Set("X-Echo-Trailer", auth)
	case "/echo/early":
		w.Header().Set("Link", "</style.css?k="+url.QueryEscape(auth)+">; rel=preload")
		w.WriteHeader(http.StatusEarlyHints)
		w.Write(body)
	case "/echo/redirect":
		http.Redirect(w, r, "https://"+r.URL.Query().Get("to")+"/landing?auth="+url.QueryEscape(auth), http.StatusFound)
	default:
		w.Write(body)
	}
}

// Leaks reports the encodings of v found in s: as itself, after undoing
// URL, HTML, JSON and JavaScript escapes, or hex or base64 of it at any
// offset, letters in any case.
func Leaks(v, s string) []string {
	var found []string
	low := strings.ToLower(v)
	views := map[string]string{"raw": s, "html": html.UnescapeString(s), "escapes": unescapes.ReplaceAllStringFunc(s, func(m string) string {
		if m == `\/` {
			return "/"
		}
		b, _ := hex.DecodeString(m[len(m)-2:])
		return string(b)
	})}
	if u, err := url.PathUnescape(s); err == nil {
		views["url"] = u
	}
	for name, view := range views {
		if strings.Contains(strings.ToLower(view), low) {
			found = append(found, name)
		}
	}
	if strings.Contains(strings.ToLower(s), hex.EncodeToString([]byte(v))) {
		found = append(found, "hex")
	}
	// Any base64 of text holding v decodes to it at some offset.
	for _, f := range strings.FieldsFunc(s, func(r rune) bool { return r > 127 || !strings.ContainsRune(base64Chars, r) }) {
		for off := 0; off < 4 && off < len(f); off++ {
			t := f[off:]
			if len(t)%4 == 1 {
				t = t[:len(t)-1]
			}
			for _, enc := range []*base64.Encoding{base64.RawStdEncoding, base64.RawURLEncoding} {
				if d, err := enc.DecodeString(t); err == nil && strings.Contains(string(d), v) {
					found = append(found, "base64")
				}
			}
		}
	}
	return found
}

// unescapes are \u00HH and \xHH escapes, and JSON's \/.
var unescapes = regexp.MustCompile(`\\(u00|x)[0-9a-fA-F]{2}|\\/`)

// base64Chars are the characters of both base64 alphabets.
const base64Chars = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/-_"
