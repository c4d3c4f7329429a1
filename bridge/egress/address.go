package egress

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/netip"
	"slices"
	"strings"
)

// specialRanges are the addresses a sandbox never reaches through a name
// that resolves to them: everything that is not a public unicast host
// (IANA's IPv4 and IPv6 special-purpose address registries, RFC 6890 and
// its updates), and the ranges that embed or translate to IPv4 addresses
// (IPv4-mapped, NAT64, 6to4, Teredo), through which a private IPv4 address
// could be reached in disguise. Only a hosts mapping or an address rule
// reaches one of them, and then only the address it names.
var specialRanges = []struct {
	prefix netip.Prefix
	what   string
}{
	{netip.MustParsePrefix("0.0.0.0/8"), "\"this network\" (0.0.0.0/8)"},
	{netip.MustParsePrefix("10.0.0.0/8"), "a private network address (10.0.0.0/8)"},
	{netip.MustParsePrefix("100.64.0.0/10"), "a carrier-grade NAT address (100.64.0.0/10)"},
	{netip.MustParsePrefix("127.0.0.0/8"), "a loopback address (127.0.0.0/8)"},
	{netip.MustParsePrefix("169.254.0.0/16"), "a link-local address (169.254.0.0/16, where cloud metadata services live)"},
	{netip.MustParsePrefix("172.16.0.0/12"), "a private network address (172.16.0.0/12)"},
	{netip.MustParsePrefix("192.0.0.0/24"), "an IETF protocol assignment (192.0.0.0/24)"},
	{netip.MustParsePrefix("192.0.2.0/24"), "a documentation address (192.0.2.0/24)"},
	{netip.MustParsePrefix("192.88.99.0/24"), "a 6to4 relay address (192.88.99.0/24)"},
	{netip.MustParsePrefix("192.168.0.0/16"), "a private network address (192.168.0.0/16)"},
	{netip.MustParsePrefix("198.18.0.0/15"), "a benchmarking address (198.18.0.0/15)"},
	{netip.MustParsePrefix("198.51.100.0/24"), "a documentation address (198.51.100.0/24)"},
	{netip.MustParsePrefix("203.0.113.0/24"), "a documentation address (203.0.113.0/24)"},
	{netip.MustParsePrefix("224.0.0.0/4"), "a multicast address (224.0.0.0/4)"},
	{netip.MustParsePrefix("240.0.0.0/4"), "a reserved or broadcast address (240.0.0.0/4)"},

	{netip.MustParsePrefix("::/128"), "the unspecified address (::)"},
	{netip.MustParsePrefix("::1/128"), "a loopback address (::1)"},
	{netip.MustParsePrefix("::ffff:0:0/96"), "an IPv4-mapped address (::ffff:0:0/96)"},
	{netip.MustParsePrefix("64:ff9b::/96"), "a NAT64 address (64:ff9b::/96)"},
	{netip.MustParsePrefix("64:ff9b:1::/48"), "a local NAT64 address (64:ff9b:1::/48)"},
	{netip.MustParsePrefix("100::/64"), "a discard-only address (100::/64)"},
	{netip.MustParsePrefix("2001::/23"), "an IETF protocol assignment (2001::/23, Teredo among them)"},
	{netip.MustParsePrefix("2001:db8::/32"), "a documentation address (2001:db8::/32)"},
	{netip.MustParsePrefix("2002::/16"), "a 6to4 address (2002::/16)"},
	{netip.MustParsePrefix("3fff::/20"), "a documentation address (3fff::/20)"},
	{netip.MustParsePrefix("5f00::/16"), "a segment routing address (5f00::/16)"},
	{netip.MustParsePrefix("fc00::/7"), "a unique local (private) address (fc00::/7)"},
	{netip.MustParsePrefix("fe80::/10"), "a link-local address (fe80::/10)"},
	{netip.MustParsePrefix("fec0::/10"), "a site-local address (fec0::/10)"},
	{netip.MustParsePrefix("ff00::/8"), "a multicast address (ff00::/8)"},
}

// globalUnicast6 is where public IPv6 unicast addresses are allocated.
var globalUnicast6 = netip.MustParsePrefix("2000::/3")

// SpecialPurpose says what kind of special-purpose address ip is ("a
// loopback address (127.0.0.0/8)"), or "" when it is a public unicast
// address a sandbox may reach through a name.
func SpecialPurpose(ip netip.Addr) string {
	if !ip.IsValid() {
		return "not an address"
	}
	if ip.Zone() != "" {
		return "an address with a zone"
	}
	for _, r := range specialRanges {
		if r.prefix.Contains(ip) {
			return r.what
		}
	}
	if ip.Is6() && !globalUnicast6.Contains(ip) {
		return "outside IPv6 global unicast space (2000::/3)"
	}
	return ""
}

// Policy is what a sandbox may reach.
type Policy struct {
	// Allow lists the hosts and ports a request may go to.
	Allow []Rule
	// Hosts maps names to the address to use for them, instead of DNS
	// (docker's --add-host). The address counts as explicitly allowed for
	// that name only, even when it is private or loopback; the name must
	// still be allowed by a rule.
	Hosts map[string]netip.Addr
}

// Rule returns the first rule that allows t.
func (p *Policy) Rule(t Target) (Rule, bool) {
	for _, r := range p.Allow {
		if r.Allows(t) {
			return r, true
		}
	}
	return Rule{}, false
}

// Check reports whether t is allowed by a rule; the Denial says why not
// and how to allow it.
func (p *Policy) Check(t Target) *Denial {
	if _, ok := p.Rule(t); ok {
		return nil
	}
	return &Denial{Target: t, Reason: ReasonNotAllowed,
		Why:  "the host is not in this sandbox's network allow list" + p.allowedList(),
		Hint: "add " + suggestRule(t) + " to sandbox.network.allow in the assistant's package.yao (or app.jsonc's sandbox defaults)"}
}

// allowedList is " (allowed: a, b)" or "" when nothing is allowed.
func (p *Policy) allowedList() string {
	if len(p.Allow) == 0 {
		return " (it allows no host)"
	}
	s := make([]string, 0, len(p.Allow))
	for _, r := range p.Allow {
		s = append(s, r.String())
	}
	const max = 20
	if len(s) > max {
		s = append(s[:max], fmt.Sprintf("and %d more", len(s)-max))
	}
	return " (allowed: " + strings.Join(s, ", ") + ")"
}

// suggestRule is the allow entry that would let t through, quoted.
func suggestRule(t Target) string {
	r := Rule{Host: t.Host, IP: t.IP}
	if t.Port != PortHTTPS && t.Port != PortHTTP {
		r.Port = t.Port
	}
	return fmt.Sprintf("%q", r.String())
}

// Resolver looks up a name's addresses; *net.Resolver is one.
type Resolver interface {
	LookupNetIP(ctx context.Context, network, host string) ([]netip.Addr, error)
}

// Addresses returns the addresses the proxy may dial for t (already
// allowed by a rule), in order of preference: the address a request names,
// the hosts mapping of a name, or what the resolver returns minus every
// special-purpose address. It resolves once per call: the caller dials
// exactly these addresses, so a name cannot be re-pointed (DNS rebinding)
// between this check and the connection.
func (p *Policy) Addresses(ctx context.Context, res Resolver, t Target) ([]netip.Addr, *Denial) {
	if t.IP.IsValid() {
		// Only an address rule matches an address: it names this address
		// explicitly. Addresses that are never a host stay refused.
		if err := checkRuleAddr(t.IP); err != nil {
			return nil, &Denial{Target: t, Reason: ReasonSpecialAddress, Why: t.IP.String() + ": " + err.Error()}
		}
		return []netip.Addr{t.IP}, nil
	}
	if ip, ok := p.Hosts[t.Host]; ok {
		return []netip.Addr{ip}, nil
	}
	addrs, err := res.LookupNetIP(ctx, "ip", t.Host)
	if err != nil || len(addrs) == 0 {
		why := t.Host + " could not be resolved"
		var dnsErr *net.DNSError
		switch {
		case errors.As(err, &dnsErr) && dnsErr.IsNotFound:
			why = t.Host + " does not exist (no such host)"
		case ctx.Err() != nil:
			why = t.Host + " could not be resolved before the request ended"
		case err != nil:
			why += ": " + err.Error()
		}
		return nil, &Denial{Target: t, Reason: ReasonUnresolvable, Why: why,
			Hint: "check the name; a private service needs sandbox.network.hosts to map it to its address"}
	}
	var ok []netip.Addr
	var refused []string
	for _, a := range addrs {
		// Go's resolver may hand IPv4 answers over in their IPv4-mapped
		// IPv6 form (golang/go#53554); a mapped address is judged, and
		// dialed, as the IPv4 address it carries.
		a = a.Unmap()
		if what := SpecialPurpose(a); what != "" {
			refused = append(refused, a.String()+" is "+what)
			continue
		}
		if !slices.Contains(ok, a) {
			ok = append(ok, a)
		}
	}
	if len(ok) == 0 {
		return nil, &Denial{Target: t, Reason: ReasonSpecialAddress,
			Why:  t.Host + " resolves only to addresses a sandbox may not reach: " + strings.Join(refused, "; "),
			Hint: fmt.Sprintf("if this private service is meant to be reachable, map it explicitly: \"hosts\": {%q: \"ADDRESS\"} in sandbox.network", t.Host)}
	}
	return ok, nil
}
