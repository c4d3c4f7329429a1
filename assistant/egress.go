package assistant

import (
	"fmt"
	"net/netip"
	"slices"
	"sort"
	"strings"

	"github.com/agentbox/agentbox/bridge/egress"
)

// This file reads sandbox.network (in package.yao and in app.jsonc's
// sandbox defaults) and sandbox.secrets: the sandbox's egress policy and the
// credentials it holds only as placeholders.

// Egress is an allow-list network policy: sandbox.network given as an
// object. The sandbox then keeps no network of its own ("none"); its
// HTTP(S) traffic goes through a per-request proxy that lets it reach these
// hosts only (see package bridge/egress for the matching rules).
type Egress struct {
	// Allow lists the hosts and ports the sandbox may reach.
	Allow []egress.Rule
	// Hosts maps names to addresses instead of DNS, like docker's
	// --add-host; a mapped address counts as explicitly allowed for that
	// name only (private and loopback addresses included).
	Hosts map[string]netip.Addr
}

// Policy is the proxy's policy for e.
func (e *Egress) Policy() egress.Policy {
	return egress.Policy{Allow: slices.Clone(e.Allow), Hosts: e.Hosts}
}

// networkModes are the string forms of sandbox.network.
var networkModes = []string{"none", "host"}

// parseNetwork checks sandbox.network at path: "none", "host", or
// {"allow": [...], "hosts": {...}}. It returns the mode and, for an
// object, the policy (with the mode "none").
func parseNetwork(d *doc, path string, v any) (string, *Egress) {
	switch n := v.(type) {
	case nil:
		return "", nil
	case string:
		if !oneOf(n, append([]string{""}, networkModes...)...) {
			d.errPath(path, "%s: want \"none\", \"host\" or {\"allow\": [HOSTS]}, got %q", path, n)
			return "", nil
		}
		return n, nil
	case map[string]any:
		return "none", parseEgress(d, path, n)
	}
	d.errPath(path, "%s: want \"none\", \"host\" or {\"allow\": [HOSTS]}", path)
	return "", nil
}

func parseEgress(d *doc, path string, m map[string]any) *Egress {
	e := &Egress{}
	for _, k := range sortedAnyKeys(m) {
		if k != "allow" && k != "hosts" {
			d.errPath(path+"."+k, "unknown field %q in %s (known: allow, hosts)", k, path)
		}
	}
	allow, ok := m["allow"]
	if !ok {
		d.errPath(path, "%s.allow is required: the hosts the sandbox may reach, like [\"registry.npmjs.org\", \"*.github.com\"] (or \"none\" for no network)", path)
		return e
	}
	list, ok := allow.([]any)
	if !ok {
		d.errPath(path+".allow", "%s.allow: want a list of hosts", path)
		return e
	}
	if len(list) == 0 {
		d.errPath(path+".allow", "%s.allow is empty: list the hosts the sandbox may reach, or use \"none\"", path)
	}
	seen := map[egress.Rule]int{}
	for i, item := range list {
		p := fmt.Sprintf("%s.allow[%d]", path, i)
		s, ok := item.(string)
		if !ok {
			d.errPath(p, "%s: want a host as a string", p)
			continue
		}
		r, err := egress.ParseRule(s)
		if err != nil {
			d.errPath(p, "%s: %v", p, err)
			continue
		}
		if j, dup := seen[r]; dup {
			d.errPath(p, "%s: %q is listed already (allow[%d])", p, s, j)
			continue
		}
		seen[r] = i
		e.Allow = append(e.Allow, r)
	}
	if hosts, ok := m["hosts"]; ok {
		hm, ok := hosts.(map[string]any)
		if !ok {
			d.errPath(path+".hosts", "%s.hosts: want an object mapping host names to addresses, like {\"git.internal\": \"10.0.0.5\"}", path)
			return e
		}
		e.Hosts = map[string]netip.Addr{}
		for _, name := range sortedAnyKeys(hm) {
			p := path + ".hosts." + name
			addr, ok := hm[name].(string)
			if !ok {
				d.errPath(p, "%s: want an address as a string", p)
				continue
			}
			host, ip, err := egress.ParseHostsEntry(name, addr)
			if err != nil {
				d.errPath(p, "%s: %v", p, err)
				continue
			}
			if _, dup := e.Hosts[host]; dup {
				d.errPath(p, "%s: %s is mapped already", p, host)
				continue
			}
			if _, ok := e.allows(host); !ok {
				d.errPath(p, "%s: no entry of %s.allow matches %s, so the mapping would never be used: add %q to allow", p, path, host, host)
				continue
			}
			e.Hosts[host] = ip
		}
	}
	return e
}

// allows reports whether a rule allows the name on some port.
func (e *Egress) allows(name string) (egress.Rule, bool) {
	for _, r := range e.Allow {
		if r.IP.IsValid() {
			continue
		}
		if (!r.Wildcard && r.Host == name) || (r.Wildcard && strings.HasSuffix(name, "."+r.Host)) {
			return r, true
		}
	}
	return egress.Rule{}, false
}

// sortedAnyKeys returns m's keys in order, so problems come out in the
// same order every time.
func sortedAnyKeys(m map[string]any) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	return keys
}
