package egress

import (
	"context"
	"errors"
	"net"
	"net/netip"
	"strings"
	"testing"
)

func TestParseRule(t *testing.T) {
	t.Parallel()
	tests := []struct {
		in   string
		want string // String() of the rule; "" when an error is expected
		err  string
	}{
		{in: "api.example.com", want: "api.example.com"},
		{in: "API.Example.COM.", want: "api.example.com"},
		{in: "*.git.example.com", want: "*.git.example.com"},
		{in: "api.example.com:8443", want: "api.example.com:8443"},
		{in: "*.example.com:22", want: "*.example.com:22"},
		{in: "my_service.internal", want: "my_service.internal"},
		{in: "bücher.example", want: "xn--bcher-kva.example"},
		{in: "203.0.113.7", want: "203.0.113.7"},
		{in: "203.0.113.7:8080", want: "203.0.113.7:8080"},
		{in: "127.0.0.1:5000", want: "127.0.0.1:5000"},
		{in: "[2001:db8::7]:8443", want: "[2001:db8::7]:8443"},
		{in: "[2001:db8::7]", want: "[2001:db8::7]"},
		{in: "2001:db8::7", want: "[2001:db8::7]"},
		{in: "localhost", want: "localhost"},

		{in: "", err: "empty"},
		{in: " api.example.com", err: "spaces"},
		{in: "https://api.example.com", err: "not a URL"},
		{in: "api.example.com/v1", err: "not a URL"},
		{in: "user@api.example.com", err: "not a URL"},
		{in: "*", err: "every host"},
		{in: "*.com", err: "top-level domain"},
		{in: "*.co.uk", err: "public suffix"},
		{in: "*.github.io", err: "public suffix"},
		{in: "a.*.example.com", err: "whole first label"},
		{in: "*example.com", err: "whole first label"},
		{in: "api.example.com:0", err: "port"},
		{in: "api.example.com:65536", err: "port"},
		{in: "api.example.com:+80", err: "port"},
		{in: "api.example.com:", err: "port"},
		{in: "api.example.com:http", err: "port"},
		{in: "-bad.example.com", err: `"-bad"`},
		{in: "a..b", err: "label"},
		{in: "a b.example.com", err: "not"},
		{in: "0.0.0.0", err: "unspecified"},
		{in: "0.0.0.0.", err: "looks like an IP"},
		{in: "127.1", err: "looks like an IP"},
		{in: "0x7f.1", err: "looks like an IP"},
		{in: "224.0.0.1", err: "multicast"},
		{in: "255.255.255.255", err: "broadcast"},
		{in: "::ffff:10.0.0.1", err: "IPv4-mapped"},
		{in: "[fe80::1%eth0]", err: "zone"},
		{in: "[2001:db8::7", err: "missing ]"},
		{in: "[api.example.com]:443", err: "not an IPv6"},
		{in: strings.Repeat("a", 64) + ".example.com", err: "longer than 63"},
		{in: strings.Repeat("abcdefghi.", 26) + "com", err: "at most 253"},
	}
	for _, tt := range tests {
		r, err := ParseRule(tt.in)
		if tt.err != "" {
			if err == nil || !strings.Contains(err.Error(), tt.err) {
				t.Errorf("ParseRule(%q) = %v, %v; want an error with %q", tt.in, r, err, tt.err)
			}
			continue
		}
		if err != nil {
			t.Errorf("ParseRule(%q): %v", tt.in, err)
			continue
		}
		if r.String() != tt.want {
			t.Errorf("ParseRule(%q) = %q, want %q", tt.in, r, tt.want)
		}
		// What String prints parses back to the same rule.
		if again, err := ParseRule(r.String()); err != nil || again != r {
			t.Errorf("ParseRule(%q) round trip = %v, %v", r.String(), again, err)
		}
	}
}

func TestRuleAllows(t *testing.T) {
	t.Parallel()
	tests := []struct {
		rule, target string
		want         bool
	}{
		{"api.example.com", "api.example.com:443", true},
		{"api.example.com", "api.example.com:80", true},
		{"api.example.com", "API.example.com.:443", true},
		{"api.example.com", "api.example.com:8443", false},
		{"api.example.com", "x.api.example.com:443", false},
		{"api.example.com", "example.com:443", false},
		{"api.example.com", "api.example.com.evil.test:443", false},
		{"api.example.com", "evilapi.example.com:443", false},
		{"api.example.com:8443", "api.example.com:8443", true},
		{"api.example.com:8443", "api.example.com:443", false},
		{"*.git.example.com", "a.git.example.com:443", true},
		{"*.git.example.com", "a.b.git.example.com:443", true},
		{"*.git.example.com", "git.example.com:443", false},
		{"*.git.example.com", "agit.example.com:443", false},
		{"*.git.example.com", "a.git.example.com:22", false},
		{"*.git.example.com:22", "a.git.example.com:22", true},
		{"203.0.113.7", "203.0.113.7:443", true},
		{"203.0.113.7", "203.0.113.8:443", false},
		{"203.0.113.7", "[::ffff:203.0.113.7]:443", false},
		{"localhost", "127.0.0.1:443", false},
		{"127.0.0.1", "localhost:443", false},
		{"[2001:db8::7]:8443", "[2001:db8:0::7]:8443", true},
		{"bücher.example", "xn--bcher-kva.example:443", true},
	}
	for _, tt := range tests {
		r, err := ParseRule(tt.rule)
		if err != nil {
			t.Fatal(err)
		}
		tg, err := ParseTarget(tt.target, 0)
		if err != nil {
			t.Fatalf("ParseTarget(%q): %v", tt.target, err)
		}
		if got := r.Allows(tg); got != tt.want {
			t.Errorf("%q allows %q = %v, want %v", tt.rule, tt.target, got, tt.want)
		}
	}
}

func TestParseTarget(t *testing.T) {
	t.Parallel()
	for _, tt := range []struct {
		in   string
		def  uint16
		want string
		err  bool
	}{
		{"example.com", 80, "example.com:80", false},
		{"Example.com:8080", 80, "example.com:8080", false},
		{"example.com", 0, "", true},
		{"[::1]:443", 0, "[::1]:443", false},
		{"10.0.0.1", 80, "10.0.0.1:80", false},
		{"[fe80::1%25eth0]:443", 0, "", true},
		{"", 80, "", true},
		{"exa mple.com:80", 0, "", true},
	} {
		got, err := ParseTarget(tt.in, tt.def)
		if (err != nil) != tt.err || (err == nil && got.String() != tt.want) {
			t.Errorf("ParseTarget(%q, %d) = %v, %v; want %q (error %v)", tt.in, tt.def, got, err, tt.want, tt.err)
		}
	}
}

func TestSpecialPurpose(t *testing.T) {
	t.Parallel()
	special := []string{
		"0.0.0.0", "10.1.2.3", "100.64.0.1", "127.0.0.1", "127.1.2.3", "169.254.169.254", "172.16.0.1",
		"172.31.255.255", "192.0.0.8", "192.0.2.1", "192.168.1.1", "198.18.0.1", "198.51.100.1",
		"203.0.113.1", "224.0.0.1", "239.255.255.250", "240.0.0.1", "255.255.255.255",
		"::", "::1", "::ffff:127.0.0.1", "::ffff:8.8.8.8", "64:ff9b::a00:1", "2001::1", "2001:db8::1",
		"2002:a00:1::1", "fc00::1", "fd12:3456::1", "fe80::1", "fec0::1", "ff02::1", "::a00:1", "100::1",
	}
	for _, s := range special {
		if SpecialPurpose(netip.MustParseAddr(s)) == "" {
			t.Errorf("%s is special-purpose, but passes", s)
		}
	}
	public := []string{"8.8.8.8", "140.82.112.3", "1.1.1.1", "172.15.255.255", "172.32.0.1", "100.63.255.255", "2606:4700::1111", "2a00:1450::1"}
	for _, s := range public {
		if why := SpecialPurpose(netip.MustParseAddr(s)); why != "" {
			t.Errorf("%s is public, but refused as %s", s, why)
		}
	}
}

// fakeResolver answers from a table, or with an error for names it does
// not know; calls counts the lookups.
type fakeResolver struct {
	answers map[string][]netip.Addr
	calls   map[string]int
}

func (f *fakeResolver) LookupNetIP(_ context.Context, _, host string) ([]netip.Addr, error) {
	if f.calls == nil {
		f.calls = map[string]int{}
	}
	f.calls[host]++
	a, ok := f.answers[host]
	if !ok {
		return nil, &net.DNSError{Err: "no such host", Name: host, IsNotFound: true}
	}
	return a, nil
}

func TestPolicyAddresses(t *testing.T) {
	t.Parallel()
	mustRule := func(s string) Rule {
		r, err := ParseRule(s)
		if err != nil {
			t.Fatal(err)
		}
		return r
	}
	p := &Policy{
		Allow: []Rule{mustRule("public.test"), mustRule("mixed.test"), mustRule("private.test"), mustRule("mapped.test"),
			mustRule("127.0.0.1:9000"), mustRule("missing.test"), mustRule("v4in6.test")},
		Hosts: map[string]netip.Addr{"mapped.test": netip.MustParseAddr("127.0.0.1")},
	}
	res := &fakeResolver{answers: map[string][]netip.Addr{
		"public.test":  {netip.MustParseAddr("140.82.112.3")},
		"mixed.test":   {netip.MustParseAddr("10.0.0.1"), netip.MustParseAddr("140.82.112.4"), netip.MustParseAddr("::1")},
		"private.test": {netip.MustParseAddr("169.254.169.254"), netip.MustParseAddr("fd00::1")},
		"mapped.test":  {netip.MustParseAddr("140.82.112.5")}, // never asked: hosts wins
		"v4in6.test":   {netip.MustParseAddr("::ffff:127.0.0.1"), netip.MustParseAddr("::ffff:140.82.112.6")},
	}}
	for _, tt := range []struct {
		target, want, reason string
	}{
		{"public.test:443", "140.82.112.3", ""},
		{"mixed.test:443", "140.82.112.4", ""},
		{"private.test:443", "", ReasonSpecialAddress},
		{"mapped.test:443", "127.0.0.1", ""},
		{"127.0.0.1:9000", "127.0.0.1", ""},
		{"missing.test:443", "", ReasonUnresolvable},
		{"v4in6.test:443", "140.82.112.6", ""}, // mapped answers: judged as IPv4
	} {
		tg, _ := ParseTarget(tt.target, 0)
		if d := p.Check(tg); d != nil {
			t.Fatalf("%s: %v", tt.target, d)
		}
		got, d := p.Addresses(context.Background(), res, tg)
		if tt.reason != "" {
			if d == nil || d.Reason != tt.reason {
				t.Errorf("%s: addresses %v, denial %v; want reason %s", tt.target, got, d, tt.reason)
			}
			continue
		}
		if d != nil || len(got) != 1 || got[0].String() != tt.want {
			t.Errorf("%s: addresses %v, denial %v; want [%s]", tt.target, got, d, tt.want)
		}
	}
	if res.calls["mapped.test"] != 0 {
		t.Error("a hosts mapping was looked up in DNS")
	}
	// The denial for a private name says how to map it.
	tg, _ := ParseTarget("private.test:443", 0)
	_, d := p.Addresses(context.Background(), res, tg)
	for _, want := range []string{"169.254.169.254 is a link-local address", "fd00::1 is a unique local", `"hosts": {"private.test"`} {
		if !strings.Contains(d.Error(), want) {
			t.Errorf("denial %q lacks %q", d.Error(), want)
		}
	}
	// Not in the allow list: the denial lists what is allowed and what to add.
	tg, _ = ParseTarget("other.test:8443", 0)
	d = p.Check(tg)
	if d == nil || d.Reason != ReasonNotAllowed || !strings.Contains(d.Hint, `"other.test:8443"`) || !strings.Contains(d.Why, "allowed: public.test") {
		t.Errorf("denial = %v", d)
	}
	var asErr error = d
	if !errors.As(asErr, &d) {
		t.Error("a Denial is an error")
	}
}

func FuzzParseRule(f *testing.F) {
	for _, s := range []string{"api.example.com", "*.example.com:22", "[2001:db8::1]:443", "10.0.0.1", "bücher.example", "*.co.uk", "a:b:c"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		r, err := ParseRule(s)
		if err != nil {
			return
		}
		again, err := ParseRule(r.String())
		if err != nil || again != r {
			t.Fatalf("ParseRule(%q) = %q, which parses to %v, %v", s, r, again, err)
		}
		if !r.IP.IsValid() {
			// The rule's own name (or a name below a wildcard) is allowed.
			name := r.Host
			if r.Wildcard {
				name = "x." + name
			}
			port := r.Port
			if port == 0 {
				port = PortHTTPS
			}
			if !r.Allows(Target{Host: name, Port: port}) {
				t.Fatalf("%q does not allow its own host %s:%d", r, name, port)
			}
		}
	})
}

func FuzzParseTarget(f *testing.F) {
	for _, s := range []string{"example.com:443", "[::1]:80", "10.0.0.1:8080", "Example.COM.", "a:b"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		tg, err := ParseTarget(s, PortHTTP)
		if err != nil {
			return
		}
		again, err := ParseTarget(tg.String(), 0)
		if err != nil || again != tg {
			t.Fatalf("ParseTarget(%q) = %v, which parses to %v, %v", s, tg, again, err)
		}
	})
}

func TestRuleCovers(t *testing.T) {
	t.Parallel()
	for _, tt := range []struct {
		allow, secret string
		want          bool
	}{
		{"api.github.com", "api.github.com", true},
		{"api.github.com:443", "api.github.com", true},
		{"api.github.com:8443", "api.github.com", false},
		{"api.github.com", "api.github.com:8443", false},
		{"api.github.com:8443", "api.github.com:8443", true},
		{"*.github.com", "api.github.com", true},
		{"*.github.com", "github.com", false},
		{"*.github.com", "*.api.github.com", true},
		{"*.github.com", "*.github.com", true},
		{"api.github.com", "*.github.com", false},
		{"*.api.github.com", "*.github.com", false},
		{"203.0.113.7", "203.0.113.7", true},
		{"203.0.113.7", "203.0.113.8", false},
	} {
		if got := rule(t, tt.allow).Covers(rule(t, tt.secret)); got != tt.want {
			t.Errorf("%q covers %q = %v, want %v", tt.allow, tt.secret, got, tt.want)
		}
	}
}

func TestParseHostsEntry(t *testing.T) {
	t.Parallel()
	if name, ip, err := ParseHostsEntry("Git.Test", "127.0.0.1"); err != nil || name != "git.test" || ip.String() != "127.0.0.1" {
		t.Errorf("= %q %v %v", name, ip, err)
	}
	for _, tt := range [][2]string{{"*.git.test", "127.0.0.1"}, {"git.test:443", "127.0.0.1"}, {"10.0.0.1", "127.0.0.1"},
		{"git.test", "localhost"}, {"git.test", "0.0.0.0"}, {"git.test", "::ffff:127.0.0.1"}, {"git.test", "ff02::1"}} {
		if _, _, err := ParseHostsEntry(tt[0], tt[1]); err == nil {
			t.Errorf("ParseHostsEntry(%q, %q) passed", tt[0], tt[1])
		}
	}
}
