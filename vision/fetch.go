package vision

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"strings"
	"syscall"
	"time"
)

// FetchTimeout bounds one fetch, redirects included.
const FetchTimeout = 30 * time.Second

// ErrHostNotAllowed is the cause of a fetch of an address whose host the
// operator does not allow (app.jsonc images.allowed_hosts).
var ErrHostNotAllowed = errors.New("host not allowed")

// Fetcher fetches images from http(s) addresses whose hosts the operator
// allows. The zero value allows none. It is safe for concurrent use.
type Fetcher struct {
	// Allowed are the host names images may come from: a name
	// ("cdn.example.com"), every name under a domain ("*.example.com"),
	// or an IP address. A name that resolves to a loopback, private or
	// link-local address is refused unless that address is allowed by
	// itself, so a public name cannot lead the server into its own
	// network.
	Allowed []string
	// Client sends the requests (nil: one with the dial rule above and
	// FetchTimeout).
	Client *http.Client
}

// Allows reports whether an image may come from host (a URL's host,
// without port).
func (f *Fetcher) Allows(host string) bool {
	h := strings.ToLower(strings.TrimSuffix(host, "."))
	for _, a := range f.Allowed {
		if a == h {
			return true
		}
		if sfx, ok := strings.CutPrefix(a, "*"); ok && strings.HasSuffix(h, sfx) {
			return true
		}
	}
	return false
}

// Fetch gets the image at rawURL (http or https, a host Allows, each
// redirect's too) and decodes it (Decode): at most MaxBytes, within
// FetchTimeout. Errors say what was wrong; ErrHostNotAllowed when the
// host is not allowed.
func (f *Fetcher) Fetch(ctx context.Context, rawURL string) (Image, error) {
	u, err := url.Parse(rawURL)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return Image{}, fmt.Errorf("%w: %q is not an http(s) address", ErrNotImage, rawURL)
	}
	if u.User != nil {
		return Image{}, fmt.Errorf("%w: the address carries credentials", ErrNotImage)
	}
	if !f.Allows(u.Hostname()) {
		return Image{}, fmt.Errorf("%w: %s (the hosts images may come from are app.jsonc's images.allowed_hosts)", ErrHostNotAllowed, u.Hostname())
	}
	ctx, cancel := context.WithTimeout(ctx, FetchTimeout)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, u.String(), nil)
	if err != nil {
		return Image{}, fmt.Errorf("%w: %v", ErrNotImage, err)
	}
	req.Header.Set("Accept", strings.Join(MediaTypes, ", "))
	resp, err := f.client().Do(req)
	if err != nil {
		return Image{}, fmt.Errorf("fetch %s: %w", u.Redacted(), err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return Image{}, fmt.Errorf("fetch %s: HTTP %d", u.Redacted(), resp.StatusCode)
	}
	if resp.ContentLength > MaxBytes {
		return Image{}, fmt.Errorf("%w: %s is %d bytes, at most %d", ErrTooLarge, u.Redacted(), resp.ContentLength, MaxBytes)
	}
	data, err := io.ReadAll(io.LimitReader(resp.Body, MaxBytes+1))
	if err != nil {
		return Image{}, fmt.Errorf("fetch %s: %w", u.Redacted(), err)
	}
	if len(data) > MaxBytes {
		return Image{}, fmt.Errorf("%w: %s is over %d bytes", ErrTooLarge, u.Redacted(), MaxBytes)
	}
	return Decode(data)
}

func (f *Fetcher) client() *http.Client {
	if f.Client != nil {
		return f.Client
	}
	d := &net.Dialer{Timeout: 10 * time.Second, Control: f.control}
	t := &http.Transport{DialContext: d.DialContext, TLSHandshakeTimeout: 10 * time.Second, ResponseHeaderTimeout: FetchTimeout,
		MaxResponseHeaderBytes: 64 << 10}
	return &http.Client{Transport: t, Timeout: FetchTimeout, CheckRedirect: func(req *http.Request, via []*http.Request) error {
		if len(via) >= 5 {
			return errors.New("more than 5 redirects")
		}
		if !f.Allows(req.URL.Hostname()) {
			return fmt.Errorf("%w: a redirect to %s", ErrHostNotAllowed, req.URL.Hostname())
		}
		return nil
	}}
}

// control refuses a connection to an address of the server's own
// networks unless that address is allowed by itself.
func (f *Fetcher) control(_, address string, _ syscall.RawConn) error {
	host, _, err := net.SplitHostPort(address)
	if err != nil {
		return err
	}
	ip := net.ParseIP(host)
	if ip == nil {
		return fmt.Errorf("%w: %s is not an address", ErrHostNotAllowed, host)
	}
	if ip.IsLoopback() || ip.IsPrivate() || ip.IsLinkLocalUnicast() || ip.IsLinkLocalMulticast() || ip.IsUnspecified() || ip.IsMulticast() {
		for _, a := range f.Allowed {
			if net.ParseIP(a).Equal(ip) {
				return nil
			}
		}
		return fmt.Errorf("%w: the name leads to %s, an address of this server's own networks (allow the address itself to fetch from it)", ErrHostNotAllowed, ip)
	}
	return nil
}
