package egress

import (
	"bufio"
	"compress/flate"
	"compress/gzip"
	"compress/zlib"
	"fmt"
	"io"
	"net/http"
	"strings"
)

// identityBody makes resp's body plain so it can be scrubbed: the proxy
// asks hosts for gzip or nothing, and decodes gzip and deflate itself (a
// host may send them unasked). A body in any other encoding (br, zstd,
// compress) could not be read for secrets, so the response is refused
// with an error saying so. Responses without a body are left as they are.
func identityBody(resp *http.Response) error {
	var codings []string
	for _, v := range resp.Header.Values("Content-Encoding") {
		for _, c := range strings.Split(v, ",") {
			if c = strings.ToLower(strings.TrimSpace(c)); c != "" && c != "identity" {
				codings = append(codings, c)
			}
		}
	}
	if len(codings) == 0 || resp.Body == nil || resp.Body == http.NoBody || resp.Request.Method == http.MethodHead ||
		resp.StatusCode == http.StatusNoContent || resp.StatusCode == http.StatusNotModified {
		return nil
	}
	if resp.StatusCode == http.StatusPartialContent {
		resp.Body.Close()
		return fmt.Errorf("the host answered a range request with a %s-encoded part, which the proxy cannot decode to keep secrets out of it", strings.Join(codings, ", "))
	}
	orig := resp.Body
	var body io.Reader = orig
	for i := len(codings) - 1; i >= 0; i-- {
		switch codings[i] {
		case "gzip", "x-gzip":
			zr, err := gzip.NewReader(body)
			if err != nil {
				orig.Close()
				return fmt.Errorf("the host's gzip body: %w", err)
			}
			body = zr
		case "deflate":
			// Meant to be zlib; some hosts send raw deflate.
			br := bufio.NewReader(body)
			if h, err := br.Peek(2); err == nil && h[0]&0x0f == 8 && (int(h[0])<<8|int(h[1]))%31 == 0 {
				zr, err := zlib.NewReader(br)
				if err != nil {
					orig.Close()
					return fmt.Errorf("the host's deflate body: %w", err)
				}
				body = zr
			} else {
				body = flate.NewReader(br)
			}
		default:
			orig.Close()
			return fmt.Errorf("the host answered with Content-Encoding %q, which the proxy cannot decode to keep secrets out of it (it asks for gzip or none)", codings[i])
		}
	}
	resp.Body = struct {
		io.Reader
		io.Closer
	}{body, orig}
	resp.Header.Del("Content-Encoding")
	resp.Header.Del("Content-Length")
	resp.ContentLength = -1
	resp.Uncompressed = true
	return nil
}
