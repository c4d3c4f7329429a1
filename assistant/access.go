package assistant

import (
	"fmt"
	"net/url"
	"strings"
)

// CheckAllowedHost checks an allowed_hosts entry (a host name, or
// "*.example.com" for the names under example.com; no port) and returns
// it in lower case.
func CheckAllowedHost(h string) (string, error) {
	n := strings.ToLower(strings.TrimSuffix(strings.TrimSpace(h), "."))
	name := strings.TrimPrefix(n, "*.")
	switch {
	case n == "" || n == "*":
		return "", fmt.Errorf("allowed host %q: want a host name (\"agentbox.example.com\") or \"*.example.com\"", h)
	case strings.ContainsAny(name, ":/[]@ *"):
		return "", fmt.Errorf("allowed host %q: want a host name without scheme, port or path (\"agentbox.example.com\")", h)
	}
	for _, label := range strings.Split(name, ".") {
		if label == "" || len(label) > 63 {
			return "", fmt.Errorf("allowed host %q: %q is not a valid host name", h, name)
		}
	}
	return n, nil
}

// CheckAllowedOrigin checks an allowed_origins entry, a web origin
// ("https://app.example.com", "http://localhost:5173": scheme, host and
// port, nothing else), and returns it as browsers send it in Origin.
func CheckAllowedOrigin(o string) (string, error) {
	u, err := url.Parse(strings.TrimSpace(o))
	switch {
	case err != nil:
		return "", fmt.Errorf("allowed origin %q: %w", o, err)
	case u.Scheme != "http" && u.Scheme != "https":
		return "", fmt.Errorf("allowed origin %q: want http:// or https:// and a host, like \"https://app.example.com\"", o)
	case u.Host == "" || u.User != nil || (u.Path != "" && u.Path != "/") || u.RawQuery != "" || u.Fragment != "":
		return "", fmt.Errorf("allowed origin %q: want scheme://host[:port] and nothing more, like \"https://app.example.com\"", o)
	}
	return u.Scheme + "://" + strings.ToLower(u.Host), nil
}
