// Package egress is a sandbox's only way out: a per-request HTTP(S) forward
// proxy that lets the sandbox reach the hosts and ports its policy allows
// and nothing else, that puts credentials the sandbox itself never holds
// into the credential headers of requests to their hosts (secret.go), and
// that scrubs their values from whatever comes back (scrub.go).
//
// The policy (this file and address.go) is separate from the proxy's
// transport: Proxy.Serve takes any net.Listener (a Unix socket mounted into
// the sandbox today, a TLS listener across the network later).
//
// Matching rules for sandbox.network.allow (and a secret's hosts):
//
//   - "api.example.com" matches that name only, not its subdomains;
//   - "*.example.com" matches every name below example.com, at any depth
//     (a.example.com, a.b.example.com), but not example.com itself; a
//     wildcard over a whole public suffix ("*.com", "*.co.uk") is refused;
//   - "203.0.113.7" or "[2001:db8::7]" matches requests for that address
//     literally; a name never matches an address rule, nor an address a name
//     rule, whatever the name resolves to;
//   - without a port a rule allows 443 and 80; "api.example.com:8443"
//     allows 8443 only;
//   - names compare case-insensitively, a trailing dot is ignored, and
//     Unicode names are compared in their ASCII (punycode) form.
package egress

import (
	"errors"
	"fmt"
	"net/netip"
	"strconv"
	"strings"
	"unicode/utf8"

	"golang.org/x/net/idna"
	"golang.org/x/net/publicsuffix"
)

// Default ports: a rule without a port allows these.
const (
	PortHTTPS = 443
	PortHTTP  = 80
)

// Rule is one entry of an allow list: a host name, a wildcard domain or an
// address, with an optional port.
type Rule struct {
	// Host is the lower-case ASCII name ("api.example.com"), or for a
	// wildcard the domain below which names match ("example.com" for
	// "*.example.com"); "" for an address rule.
	Host string
	// Wildcard is set for "*.DOMAIN" rules.
	Wildcard bool
	// IP is the address of an address rule (invalid for name rules).
	IP netip.Addr
	// Port is the only port the rule allows; 0 allows 443 and 80.
	Port uint16
}

// String is the rule as it would be written in an allow list.
func (r Rule) String() string {
	var h string
	switch {
	case r.IP.IsValid() && r.IP.Is6():
		h = "[" + r.IP.String() + "]"
	case r.IP.IsValid():
		h = r.IP.String()
	case r.Wildcard:
		h = "*." + r.Host
	default:
		h = r.Host
	}
	if r.Port != 0 {
		h += ":" + strconv.Itoa(int(r.Port))
	}
	return h
}

// Allows reports whether the rule lets a request reach t.
func (r Rule) Allows(t Target) bool {
	if r.Port == 0 {
		if t.Port != PortHTTPS && t.Port != PortHTTP {
			return false
		}
	} else if t.Port != r.Port {
		return false
	}
	if r.IP.IsValid() || t.IP.IsValid() {
		return r.IP.IsValid() && t.IP.IsValid() && r.IP == t.IP
	}
	if r.Wildcard {
		return strings.HasSuffix(t.Host, "."+r.Host)
	}
	return t.Host == r.Host
}

// ParseRule parses one allow-list entry ("api.example.com",
// "*.git.example.com", "api.example.com:8443", "203.0.113.7",
// "[2001:db8::7]:8443"). The error says what is wrong in words a user can
// act on.
func ParseRule(s string) (Rule, error) {
	if s == "" {
		return Rule{}, errors.New("empty host")
	}
	if strings.TrimSpace(s) != s {
		return Rule{}, fmt.Errorf("%q has spaces around it", s)
	}
	if strings.Contains(s, "://") || strings.ContainsAny(s, "/?#@") {
		return Rule{}, fmt.Errorf("%q: want a host with an optional port (\"api.example.com\", \"*.example.com\", \"api.example.com:8443\"), not a URL", s)
	}
	host, port, err := splitHostPort(s)
	if err != nil {
		return Rule{}, err
	}
	r := Rule{Port: port}
	if ip, err := netip.ParseAddr(host); err == nil {
		if err := checkRuleAddr(ip); err != nil {
			return Rule{}, fmt.Errorf("%q: %w", s, err)
		}
		r.IP = ip
		return r, nil
	}
	if strings.HasPrefix(host, "[") {
		return Rule{}, fmt.Errorf("%q: not an IPv6 address", s)
	}
	if host == "*" {
		return Rule{}, fmt.Errorf("%q matches every host: list the hosts, or use \"network\": \"host\" for no policy at all", s)
	}
	if rest, ok := strings.CutPrefix(host, "*."); ok {
		r.Wildcard = true
		host = rest
	}
	if strings.Contains(host, "*") {
		return Rule{}, fmt.Errorf("%q: a wildcard may only be the whole first label (\"*.example.com\")", s)
	}
	name, err := normalizeName(host)
	if err != nil {
		return Rule{}, fmt.Errorf("%q: %w", s, err)
	}
	if r.Wildcard {
		if !strings.Contains(name, ".") {
			return Rule{}, fmt.Errorf("%q covers a whole top-level domain: name a domain below it", s)
		}
		if ps, _ := publicsuffix.PublicSuffix(name); ps == name {
			return Rule{}, fmt.Errorf("%q covers a whole public suffix (%s): name a domain below it", s, name)
		}
	}
	r.Host = name
	return r, nil
}

// checkRuleAddr refuses addresses that never name one host.
func checkRuleAddr(ip netip.Addr) error {
	switch {
	case ip.Zone() != "":
		return errors.New("an address with a zone cannot be allowed")
	case ip.Is4In6():
		return fmt.Errorf("an IPv4-mapped IPv6 address: write the IPv4 address %s", ip.Unmap())
	case ip.IsUnspecified():
		return errors.New("the unspecified address is no host")
	case ip.IsMulticast() || ip == netip.AddrFrom4([4]byte{255, 255, 255, 255}):
		return errors.New("a multicast or broadcast address is no host")
	}
	return nil
}

// splitHostPort splits "host", "host:port", "[v6]", "[v6]:port" and a bare
// IPv6 address.
func splitHostPort(s string) (string, uint16, error) {
	if strings.HasPrefix(s, "[") {
		end := strings.IndexByte(s, ']')
		if end < 0 {
			return "", 0, fmt.Errorf("%q: missing ] after the IPv6 address", s)
		}
		host, rest := s[1:end], s[end+1:]
		if rest == "" {
			if _, err := netip.ParseAddr(host); err != nil {
				return "", 0, fmt.Errorf("%q: not an IPv6 address", s)
			}
			return host, 0, nil
		}
		p, ok := strings.CutPrefix(rest, ":")
		if !ok {
			return "", 0, fmt.Errorf("%q: want [ADDRESS]:PORT", s)
		}
		port, err := parsePort(p)
		if err != nil {
			return "", 0, fmt.Errorf("%q: %w", s, err)
		}
		if _, err := netip.ParseAddr(host); err != nil {
			return "", 0, fmt.Errorf("%q: not an IPv6 address", s)
		}
		return host, port, nil
	}
	switch strings.Count(s, ":") {
	case 0:
		return s, 0, nil
	case 1:
		host, p, _ := strings.Cut(s, ":")
		port, err := parsePort(p)
		if err != nil {
			return "", 0, fmt.Errorf("%q: %w", s, err)
		}
		return host, port, nil
	}
	// A bare IPv6 address has no port.
	return s, 0, nil
}

func parsePort(p string) (uint16, error) {
	n, err := strconv.ParseUint(p, 10, 16)
	if err != nil || n == 0 || p[0] == '+' || p[0] == '0' {
		return 0, fmt.Errorf("port %q: want a number from 1 to 65535", p)
	}
	return uint16(n), nil
}

// maxName is the longest DNS name.
const maxName = 253

// normalizeName returns the lower-case ASCII form of a host name, without
// a trailing dot, or an error saying what is wrong with it.
func normalizeName(h string) (string, error) {
	h = strings.TrimSuffix(h, ".")
	if h == "" {
		return "", errors.New("empty host name")
	}
	if !utf8.ValidString(h) {
		return "", errors.New("not valid UTF-8")
	}
	// idna's lookup profile maps Unicode names to punycode and lower-cases;
	// its strict STD3 rules would refuse "_" (used in real host names, e.g.
	// SRV-style service names), so underscores are checked here instead.
	a, err := idnaProfile.ToASCII(h)
	if err != nil {
		return "", fmt.Errorf("not a valid host name: %v", err)
	}
	if again, err := idnaProfile.ToASCII(a); err != nil || again != a {
		return "", errors.New("not a valid host name")
	}
	if len(a) > maxName {
		return "", fmt.Errorf("host name is %d characters long (at most %d)", len(a), maxName)
	}
	// A last label of digits (or hex) makes the name an address to
	// resolvers that accept inet_aton forms ("127.1", "0x7f.1"): such a
	// name would dodge the address rules.
	last := a[strings.LastIndexByte(a, '.')+1:]
	if strings.Trim(last, "0123456789") == "" || strings.HasPrefix(last, "0x") {
		return "", errors.New("looks like an IP address; write addresses in their usual form")
	}
	for label := range strings.SplitSeq(a, ".") {
		if label == "" {
			return "", errors.New("empty label in host name")
		}
		if len(label) > 63 {
			return "", fmt.Errorf("label %q is longer than 63 characters", label)
		}
		if label[0] == '-' || label[len(label)-1] == '-' {
			return "", fmt.Errorf("label %q starts or ends with '-'", label)
		}
		for i := 0; i < len(label); i++ {
			c := label[i]
			if !(c >= 'a' && c <= 'z' || c >= '0' && c <= '9' || c == '-' || c == '_') {
				return "", fmt.Errorf("character %q is not allowed in a host name", c)
			}
		}
	}
	return a, nil
}

var idnaProfile = idna.New(idna.MapForLookup(), idna.StrictDomainName(false), idna.BidiRule())

// Target is the host and port a request is for, normalised: a lower-case
// ASCII name or an address, and a port.
type Target struct {
	// Host is the normalised name ("" when the request names an address).
	Host string
	// IP is the address the request names literally.
	IP   netip.Addr
	Port uint16
}

// ParseTarget parses the authority of a request ("host:port", "host",
// "[v6]:port"), using defaultPort when it has none (0: a port is required).
func ParseTarget(authority string, defaultPort uint16) (Target, error) {
	if authority == "" {
		return Target{}, errors.New("no host")
	}
	host, port, err := splitHostPort(authority)
	if err != nil {
		return Target{}, err
	}
	if port == 0 {
		if defaultPort == 0 {
			return Target{}, fmt.Errorf("%q: a port is required", authority)
		}
		port = defaultPort
	}
	if ip, err := netip.ParseAddr(host); err == nil {
		if ip.Zone() != "" {
			return Target{}, fmt.Errorf("%q: an address with a zone", authority)
		}
		return Target{IP: ip, Port: port}, nil
	}
	name, err := normalizeName(host)
	if err != nil {
		return Target{}, fmt.Errorf("%q: %w", authority, err)
	}
	return Target{Host: name, Port: port}, nil
}

// Name is the host part: the name, or the address.
func (t Target) Name() string {
	if t.IP.IsValid() {
		return t.IP.String()
	}
	return t.Host
}

// String is "host:port" ("[v6]:port" for IPv6 addresses); usage and logs
// are keyed by it.
func (t Target) String() string {
	if t.IP.IsValid() {
		return netip.AddrPortFrom(t.IP, t.Port).String()
	}
	return t.Host + ":" + strconv.Itoa(int(t.Port))
}

// Covers reports whether r allows every target that o allows on the ports
// a secret travels on: o's port, or 443 when o has none (a secret never
// goes over plain HTTP, so port 80 does not matter).
func (r Rule) Covers(o Rule) bool {
	port := o.Port
	if port == 0 {
		port = PortHTTPS
	}
	switch {
	case r.Port == 0 && port != PortHTTPS && port != PortHTTP:
		return false
	case r.Port != 0 && r.Port != port:
		return false
	}
	switch {
	case r.IP.IsValid() || o.IP.IsValid():
		return r.IP == o.IP
	case !r.Wildcard:
		return !o.Wildcard && r.Host == o.Host
	case o.Wildcard:
		return o.Host == r.Host || strings.HasSuffix(o.Host, "."+r.Host)
	default:
		return strings.HasSuffix(o.Host, "."+r.Host)
	}
}

// ParseHostsEntry parses one entry of a hosts map: a plain host name (no
// wildcard, no port) and the address it stands for.
func ParseHostsEntry(name, addr string) (string, netip.Addr, error) {
	r, err := ParseRule(name)
	switch {
	case err != nil:
		return "", netip.Addr{}, err
	case r.IP.IsValid() || r.Wildcard || r.Port != 0:
		return "", netip.Addr{}, fmt.Errorf("%q: want a plain host name, without wildcard or port", name)
	}
	ip, err := netip.ParseAddr(addr)
	if err != nil {
		return "", netip.Addr{}, fmt.Errorf("%q: want an IPv4 or IPv6 address", addr)
	}
	if err := checkRuleAddr(ip); err != nil {
		return "", netip.Addr{}, fmt.Errorf("%q: %w", addr, err)
	}
	return r.Host, ip, nil
}
