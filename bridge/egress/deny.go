package egress

import (
	"fmt"
	"net/http"
	"strconv"
	"strings"
)

// Reasons a request is refused (Denial.Reason).
const (
	// ReasonNotAllowed: no allow rule matches the host and port.
	ReasonNotAllowed = "not_allowed"
	// ReasonSpecialAddress: the host is (or resolves only to) a private,
	// loopback, link-local or other special-purpose address.
	ReasonSpecialAddress = "special_address"
	// ReasonUnresolvable: the name could not be resolved.
	ReasonUnresolvable = "unresolvable"
	// ReasonBadRequest: the request is not one a proxy can forward (no
	// absolute URL, https:// without CONNECT, a malformed host).
	ReasonBadRequest = "bad_request"
	// ReasonSecretRefused: the request would carry a secret where the
	// proxy does not send one (its placeholder outside the headers the
	// secret names, or in a protocol upgrade).
	ReasonSecretRefused = "secret_refused"
)

// Denial is a refused request: what it was for, why it was refused and how
// to allow it. It is an error.
type Denial struct {
	// Target is the host and port asked for (zero for a bad request).
	Target Target
	// Reason is one of the Reason* codes.
	Reason string
	// Why says what was refused and why, in a sentence.
	Why string
	// Hint says how to allow it, when it can be allowed.
	Hint string
}

func (d *Denial) Error() string {
	s := "egress denied: "
	if d.Target.Port != 0 {
		s = "egress to " + d.Target.String() + " denied: "
	}
	s += d.Why
	if d.Hint != "" {
		s += "; to allow it: " + d.Hint
	}
	return s
}

// Message is the denial as the notice event and the response body say it.
func (d *Denial) Message() string {
	var b strings.Builder
	b.WriteString("agentbox egress proxy: request refused.\n")
	if d.Target.Port != 0 {
		fmt.Fprintf(&b, "host: %s\n", d.Target)
	}
	fmt.Fprintf(&b, "why: %s\n", d.Why)
	if d.Hint != "" {
		fmt.Fprintf(&b, "to allow it: %s\n", d.Hint)
	}
	b.WriteString("This sandbox has no network of its own: every connection goes through this proxy, which allows only the hosts its policy names.\n")
	return b.String()
}

// headerDenied carries the reason in a header too: clients that do not
// show a refused CONNECT's body (curl, git) still show headers in verbose
// mode (curl -v, GIT_CURL_VERBOSE=1).
const headerDenied = "X-Agentbox-Egress-Denied"

// write answers the denied request: 403 (400 for a bad request) with a
// plain-text body the agent can read.
func (d *Denial) write(w http.ResponseWriter) {
	status := http.StatusForbidden
	if d.Reason == ReasonBadRequest {
		status = http.StatusBadRequest
	}
	body := d.Message()
	h := w.Header()
	h.Set("Content-Type", "text/plain; charset=utf-8")
	h.Set("Content-Length", strconv.Itoa(len(body)))
	h.Set("Cache-Control", "no-store")
	h.Set(headerDenied, oneLine(d.Error()))
	h.Set("Connection", "close")
	w.WriteHeader(status)
	_, _ = w.Write([]byte(body))
}

// maxReason bounds the reason phrase of a refused CONNECT.
const maxReason = 300

// writeConnect answers a refused CONNECT on the raw connection, with the
// reason in the status line too: most clients show only the status of a
// failed tunnel (Python's "Tunnel connection failed: 403 ...", Go's
// "proxyconnect" error), never its body. It reports false when the
// connection cannot be taken over (write then answers normally).
func (d *Denial) writeConnect(w http.ResponseWriter) bool {
	hj, ok := w.(http.Hijacker)
	if !ok {
		return false
	}
	c, brw, err := hj.Hijack()
	if err != nil {
		return false
	}
	defer c.Close()
	status := http.StatusForbidden
	if d.Reason == ReasonBadRequest {
		status = http.StatusBadRequest
	}
	reason := oneLine(d.Error())
	if len(reason) > maxReason {
		reason = reason[:maxReason] + "..."
	}
	body := d.Message()
	fmt.Fprintf(brw, "HTTP/1.1 %d %s (%s)\r\n", status, http.StatusText(status), reason)
	fmt.Fprintf(brw, "Content-Type: text/plain; charset=utf-8\r\nContent-Length: %d\r\n%s: %s\r\nConnection: close\r\n\r\n%s",
		len(body), headerDenied, oneLine(d.Error()), body)
	_ = brw.Flush()
	return true
}

// oneLine makes s safe as a header value.
func oneLine(s string) string {
	return strings.Map(func(r rune) rune {
		if r < ' ' || r == 0x7f {
			return ' '
		}
		return r
	}, s)
}
