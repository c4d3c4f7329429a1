// Package preview serves what runs in a sandbox to its user's browser: each
// port a sandbox declares gets a preview URL on the agentbox server, and
// the server relays HTTP and WebSocket traffic to that port inside the
// sandbox's own network namespace (through the bridge's port relay; no
// bridge network, no published port).
//
// The API is small:
//
//   - New(Config) makes a Manager; the server serves Manager.Handler for
//     the hosts Manager.Owns, in front of everything else.
//   - Manager.Open(Owner, Dialer, ports) registers a live sandbox's ports
//     (the pipeline does it when it creates a sandbox whose assistant
//     declares ports); the returned *Sandbox's SetListening reports which
//     ports listen, End ends its previews when the sandbox goes.
//   - Manager.List(user, chat, base) gives the chat's ports, each listening
//     one with a fresh URL that carries a short-lived ticket.
//   - Manager.Ended(user, chat) tells when the chat's previews end (agentbox
//     run, which serves them itself, waits on it after the answer).
//
// A desktop (noVNC) or any other web UI a sandbox serves is one more
// declared port: it gets its URL, access rules and lifetime from here.
//
// # Access model
//
// A preview lives on a host of its own, "<token>.<domain>" (by default
// domain "preview.localhost", which browsers resolve to loopback; an
// operator sets a wildcard domain of theirs), never on the API's host:
// cookies are scoped by host, not port, and a page served from a preview
// must not be same-origin with the API. Each port of each sandbox gets a
// random 130-bit token, so its URL cannot be guessed. The URL the API
// hands out carries a ticket (HMAC-signed: token, user, expiry; valid for
// Config.TicketTTL); the first request trades it for an HttpOnly cookie
// scoped to that preview's host alone, and is redirected to the same path
// without it. Every later request needs that cookie, bound to the same
// token and the chat's user. The cookie and the ticket are never passed
// on to the app in the sandbox.
//
// Answers: an unknown token is 404; a missing, bad or expired ticket or
// cookie, or one of another user, 403; a port nothing listens on yet, 502
// with a page that retries; a preview whose sandbox ended (idle timeout,
// the chat deleted or stopped, the app reloaded), 410 with a page saying
// so. Undeclared ports have no token, hence no URL.
package preview

import (
	"context"
	"crypto/hmac"
	"crypto/rand"
	"crypto/sha256"
	"encoding/base32"
	"encoding/base64"
	"errors"
	"fmt"
	"net"
	"net/http"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"
)

// Defaults of Config.
const (
	DefaultDomain    = "preview.localhost"
	DefaultTicketTTL = 2 * time.Minute
	DefaultCookieTTL = 12 * time.Hour
	// endedKeep is how long an ended preview still answers with the ended
	// page rather than 404.
	endedKeep = time.Hour
	// maxEnded bounds the ended previews remembered.
	maxEnded = 10000
)

// TicketParam is the query parameter that carries a ticket; CookieName
// the cookie it becomes.
const (
	TicketParam = "agentbox_preview_ticket"
	CookieName  = "agentbox_preview"
)

// Config configures a Manager.
type Config struct {
	// Domain is the parent of the preview hosts, "<token>.<Domain>",
	// optionally with a port ("previews.example.com:443"); without one a
	// URL takes the port of the API request that asked for it. It must
	// not be the API's own host. Default DefaultDomain.
	Domain string
	// Key signs tickets and cookies (nil: a random key, so tickets and
	// cookies end with the process, as the sandboxes do).
	Key []byte
	// TicketTTL is how long a URL's ticket may be used (DefaultTicketTTL);
	// CookieTTL how long the cookie it becomes lasts (DefaultCookieTTL).
	TicketTTL, CookieTTL time.Duration
}

// Owner is the chat a sandbox runs for.
type Owner struct {
	User, Chat string
}

// Port is a declared port and its label ("" when none).
type Port struct {
	Port  int
	Label string
}

// Dialer connects to a port inside a sandbox (the bridge's port relay).
// When nothing listens on the port its error wraps ErrNotListening.
type Dialer interface {
	Dial(ctx context.Context, port int) (net.Conn, error)
}

// ErrNotListening is what a Dialer's error wraps when nothing listens on
// the port: the preview answers with a page that retries.
var ErrNotListening = errors.New("nothing listens on this port in the sandbox yet")

// Manager holds the previews of the live sandboxes. It is safe for
// concurrent use.
type Manager struct {
	cfg    Config
	domain string // lower case, without a port
	port   string // Config.Domain's port ("" none)

	mu      sync.Mutex
	origin  *url.URL // SetOrigin's; nil: http on Config.Domain's port
	byToken map[string]*target
	byChat  map[Owner]*Sandbox
	ended   []*Sandbox // oldest first
}

// New checks cfg and makes a Manager.
func New(cfg Config) (*Manager, error) {
	if cfg.Domain == "" {
		cfg.Domain = DefaultDomain
	}
	if cfg.TicketTTL <= 0 {
		cfg.TicketTTL = DefaultTicketTTL
	}
	if cfg.CookieTTL <= 0 {
		cfg.CookieTTL = DefaultCookieTTL
	}
	if len(cfg.Key) == 0 {
		cfg.Key = make([]byte, 32)
		_, _ = rand.Read(cfg.Key)
	}
	domain, port := strings.ToLower(cfg.Domain), ""
	if h, p, err := net.SplitHostPort(domain); err == nil {
		domain, port = h, p
	}
	if domain == "" || strings.ContainsAny(domain, "/*@ ") || strings.HasPrefix(domain, ".") {
		return nil, fmt.Errorf("preview domain %q: want a host name such as preview.localhost or previews.example.com", cfg.Domain)
	}
	return &Manager{cfg: cfg, domain: domain, port: port, byToken: map[string]*target{}, byChat: map[Owner]*Sandbox{}}, nil
}

// Domain is the parent of the preview hosts (without a port).
func (m *Manager) Domain() string { return m.domain }

// Sandbox is the previews of one live sandbox.
type Sandbox struct {
	m       *Manager
	owner   Owner
	dialer  Dialer
	ports   []Port
	targets map[int]*target
	tr      *http.Transport

	mu        sync.Mutex
	listening []int
	ended     string // why, once ended
	endedAt   time.Time
	done      chan struct{} // closed by End
}

// target is one port of a sandbox, under its token.
type target struct {
	sb    *Sandbox
	port  Port
	token string
}

// Open registers the previews of a sandbox's ports for owner. A chat has
// one live sandbox: opening another ends the previous one's previews.
func (m *Manager) Open(owner Owner, d Dialer, ports []Port) *Sandbox {
	sb := &Sandbox{m: m, owner: owner, dialer: d, ports: slices.Clone(ports), targets: map[int]*target{}, done: make(chan struct{})}
	sb.tr = &http.Transport{
		DialContext: func(ctx context.Context, _, addr string) (net.Conn, error) {
			_, p, _ := net.SplitHostPort(addr)
			port, _ := strconv.Atoi(p)
			return d.Dial(ctx, port)
		},
		MaxIdleConnsPerHost: 16,
		IdleConnTimeout:     90 * time.Second,
		DisableCompression:  true,
		// The relay is a local socket: what is slow is the app.
		ExpectContinueTimeout: time.Second,
	}
	for _, p := range ports {
		sb.targets[p.Port] = &target{sb: sb, port: p, token: newToken()}
	}
	m.mu.Lock()
	old := m.byChat[owner]
	m.byChat[owner] = sb
	for _, t := range sb.targets {
		m.byToken[t.token] = t
	}
	m.mu.Unlock()
	if old != nil {
		old.End("the chat's sandbox was replaced")
	}
	return sb
}

// SetListening sets which of the sandbox's ports listen (the port relay's
// report). It returns the ports that started listening with this call.
func (s *Sandbox) SetListening(ports []int) (opened []int) {
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, p := range ports {
		if !slices.Contains(s.listening, p) && s.targets[p] != nil {
			opened = append(opened, p)
		}
	}
	s.listening = slices.Clone(ports)
	return opened
}

// End ends the sandbox's previews: from now on their URLs answer with the
// ended page, saying why. Open connections are cut. Idempotent.
func (s *Sandbox) End(why string) {
	s.mu.Lock()
	if s.ended != "" {
		s.mu.Unlock()
		return
	}
	s.ended, s.endedAt = why, time.Now()
	close(s.done)
	s.mu.Unlock()
	s.tr.CloseIdleConnections()
	m := s.m
	m.mu.Lock()
	if m.byChat[s.owner] == s {
		delete(m.byChat, s.owner)
	}
	m.ended = append(m.ended, s)
	m.pruneLocked(time.Now())
	m.mu.Unlock()
}

// pruneLocked forgets the ended previews past endedKeep or maxEnded.
func (m *Manager) pruneLocked(now time.Time) {
	n := 0
	for n < len(m.ended) && (len(m.ended)-n > maxEnded || now.Sub(m.ended[n].endedAt) > endedKeep) {
		for _, t := range m.ended[n].targets {
			delete(m.byToken, t.token)
		}
		n++
	}
	m.ended = slices.Delete(m.ended, 0, n)
}

// endedWhy is why s ended ("" while it lives).
func (s *Sandbox) endedWhy() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.ended
}

// Ended returns a channel closed when the previews of the chat's live
// sandbox end, and why they ended once it is closed; a nil channel when
// the chat has no live sandbox with previews.
func (m *Manager) Ended(user, chat string) (<-chan struct{}, func() string) {
	m.mu.Lock()
	sb := m.byChat[Owner{User: user, Chat: chat}]
	m.mu.Unlock()
	if sb == nil {
		return nil, func() string { return "" }
	}
	return sb.done, sb.endedWhy
}

// State of a port in List.
const (
	StateListening = "listening" // the URL serves it
	StateWaiting   = "waiting"   // declared; nothing listens on it yet
)

// Status is a declared port of a chat's live sandbox.
type Status struct {
	Port  int    `json:"port"`
	Label string `json:"label,omitempty"`
	// State is StateListening or StateWaiting.
	State string `json:"state"`
	// URL opens the preview; it carries a ticket valid for a short while
	// (fetch the list again for a fresh one). Set for every port: a
	// waiting port's page says so and retries.
	URL string `json:"url"`
	// ExpiresAt is when the URL's ticket expires.
	ExpiresAt time.Time `json:"expires_at"`
}

// List returns the declared ports of the chat's live sandbox (none when it
// has none), each with a fresh URL. base is the scheme and host of the API
// request ("http://127.0.0.1:8080"): the URL takes its scheme, and its port
// unless Config.Domain names one (nil: SetOrigin's).
func (m *Manager) List(user, chat string, base *url.URL) []Status {
	m.mu.Lock()
	sb := m.byChat[Owner{User: user, Chat: chat}]
	if base == nil {
		base = m.origin
	}
	m.mu.Unlock()
	if sb == nil || sb.endedWhy() != "" {
		return []Status{}
	}
	sb.mu.Lock()
	listening := slices.Clone(sb.listening)
	sb.mu.Unlock()
	exp := time.Now().Add(m.cfg.TicketTTL)
	out := make([]Status, 0, len(sb.ports))
	for _, p := range sb.ports {
		t := sb.targets[p.Port]
		st := Status{Port: p.Port, Label: p.Label, State: StateWaiting, ExpiresAt: exp.UTC().Truncate(time.Second)}
		if slices.Contains(listening, p.Port) {
			st.State = StateListening
		}
		u := m.originOf(t.token, base)
		u.Path = "/"
		u.RawQuery = url.Values{TicketParam: {m.sign(t.token, user, exp)}}.Encode()
		st.URL = u.String()
		out = append(out, st)
	}
	return out
}

// SetOrigin sets the scheme and port of the URLs made without an API
// request to take them from (URL with a nil base): the server's own
// listen address ("http://127.0.0.1:8080").
func (m *Manager) SetOrigin(base *url.URL) {
	m.mu.Lock()
	m.origin = base
	m.mu.Unlock()
}

// URL is a fresh preview URL of port in the chat's live sandbox, at path
// ("" or "/..."), for base as in List (nil: SetOrigin's). It fails when
// the chat has no live sandbox or did not declare the port.
func (m *Manager) URL(user, chat string, port int, path string, base *url.URL) (string, error) {
	m.mu.Lock()
	sb := m.byChat[Owner{User: user, Chat: chat}]
	if base == nil {
		base = m.origin
	}
	m.mu.Unlock()
	if sb == nil || sb.endedWhy() != "" {
		return "", fmt.Errorf("the chat has no live sandbox to preview")
	}
	t := sb.targets[port]
	if t == nil {
		return "", fmt.Errorf("port %d is not declared (the assistant's sandbox.ports, computer.ports or services)", port)
	}
	if path == "" {
		path = "/"
	}
	if !strings.HasPrefix(path, "/") {
		return "", fmt.Errorf("path %q: want one that starts with /", path)
	}
	u := m.originOf(t.token, base)
	p, err := url.Parse(path)
	if err != nil {
		return "", fmt.Errorf("path %q: %w", path, err)
	}
	u.Path, u.RawQuery = p.Path, p.RawQuery
	q := u.Query()
	q.Set(TicketParam, m.sign(t.token, user, time.Now().Add(m.cfg.TicketTTL)))
	u.RawQuery = q.Encode()
	return u.String(), nil
}

// origin is the preview origin of token, for an API request to base.
func (m *Manager) originOf(token string, base *url.URL) *url.URL {
	scheme, port := "http", m.port
	if base != nil {
		scheme = base.Scheme
		if port == "" {
			port = base.Port()
		}
	}
	host := token + "." + m.domain
	if port != "" && !(scheme == "http" && port == "80") && !(scheme == "https" && port == "443") {
		host = net.JoinHostPort(host, port)
	}
	return &url.URL{Scheme: scheme, Host: host}
}

// Owns reports whether host (a request's Host, with or without a port) is
// a preview host, to be served by Handler and nothing else.
func (m *Manager) Owns(host string) bool {
	_, ok := m.tokenOf(host)
	return ok
}

// tokenOf is the token label of a preview host.
func (m *Manager) tokenOf(host string) (string, bool) {
	if h, _, err := net.SplitHostPort(host); err == nil {
		host = h
	}
	host = strings.TrimSuffix(strings.ToLower(host), ".")
	tok, ok := strings.CutSuffix(host, "."+m.domain)
	if !ok || tok == "" || strings.Contains(tok, ".") {
		return "", false
	}
	return tok, true
}

// newToken is a preview's random token: 130 bits, a DNS label of 26
// lower-case letters and digits.
func newToken() string {
	b := make([]byte, 17)
	_, _ = rand.Read(b)
	return strings.ToLower(base32.StdEncoding.WithPadding(base32.NoPadding).EncodeToString(b))[:26]
}

// sign makes a ticket or cookie value: token, user and expiry, signed.
func (m *Manager) sign(token, user string, exp time.Time) string {
	payload := token + "|" + user + "|" + strconv.FormatInt(exp.Unix(), 10)
	mac := hmac.New(sha256.New, m.cfg.Key)
	mac.Write([]byte(payload))
	return base64.RawURLEncoding.EncodeToString([]byte(payload)) + "." + base64.RawURLEncoding.EncodeToString(mac.Sum(nil))
}

// Errors of verify.
var (
	errBadSignature = errors.New("not a valid preview ticket")
	errExpired      = errors.New("the preview ticket expired")
	errOtherPreview = errors.New("the ticket is for another preview or user")
)

// verify checks a ticket or cookie value against the preview's token and
// user.
func (m *Manager) verify(v, token, user string) error {
	p, sig, ok := strings.Cut(v, ".")
	if !ok {
		return errBadSignature
	}
	payload, err1 := base64.RawURLEncoding.DecodeString(p)
	got, err2 := base64.RawURLEncoding.DecodeString(sig)
	if err1 != nil || err2 != nil {
		return errBadSignature
	}
	mac := hmac.New(sha256.New, m.cfg.Key)
	mac.Write(payload)
	if !hmac.Equal(got, mac.Sum(nil)) {
		return errBadSignature
	}
	f := strings.Split(string(payload), "|")
	if len(f) != 3 {
		return errBadSignature
	}
	exp, err := strconv.ParseInt(f[2], 10, 64)
	if err != nil {
		return errBadSignature
	}
	if f[0] != token || f[1] != user {
		return errOtherPreview
	}
	if time.Now().Unix() > exp {
		return errExpired
	}
	return nil
}
