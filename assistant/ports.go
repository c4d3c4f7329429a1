package assistant

import (
	"encoding/json"
	"fmt"
	"slices"
	"strings"
)

// Port is a port an assistant's sandbox may serve to its user as a
// preview (sandbox.ports, Yao v2's computer.ports, Yao's services).
type Port struct {
	Port  int
	Label string
}

// MaxPorts bounds the ports one assistant declares.
const MaxPorts = 16

// reservedPorts are the sandbox's own loopback ports (the bridge's model
// and egress proxies), which no preview may reach.
var reservedPorts = map[int]string{41880: "the model proxy", 41881: "the egress proxy"}

// parsePorts checks a list of ports at path, each an integer or an object:
// {port, label} (agentbox, Yao's computer.ports, which also has host_port
// and protocol) or {port, name} (Yao's services, which also have protocol
// and public). A host_port or public setting is noted in notApplied: a
// preview is never published on the host, nor public.
func parsePorts(d *doc, path string, raw []any, into []Port, notApplied *[]string) []Port {
	for i, v := range raw {
		at := fmt.Sprintf("%s[%d]", path, i)
		var p Port
		switch v := v.(type) {
		case float64, json.Number:
			n, ok := portNumber(v)
			if !ok {
				d.errPath(at, "%s: want a port from 1 to 65535, got %v", at, v)
				continue
			}
			p.Port = n
		case map[string]any:
			for k := range v {
				if !slices.Contains([]string{"port", "label", "name", "protocol", "host_port", "public"}, k) {
					d.errPath(at, "%s: unknown field %q (want port, label, protocol)", at, k)
				}
			}
			n, ok := portNumber(v["port"])
			if !ok {
				d.errPath(at+".port", "%s.port: want a port from 1 to 65535, got %v", at, v["port"])
				continue
			}
			p.Port = n
			for _, k := range []string{"label", "name"} {
				if s, ok := v[k].(string); ok && p.Label == "" {
					p.Label = strings.TrimSpace(s)
				} else if v[k] != nil && !ok {
					d.errPath(at+"."+k, "%s.%s: want a string", at, k)
				}
			}
			switch proto := v["protocol"]; proto {
			case nil, "", "tcp", "http", "https", "ws":
			default:
				d.errPath(at+".protocol", "%s.protocol: previews carry HTTP and WebSocket over TCP; got %v", at, proto)
			}
			if hp, ok := v["host_port"]; ok && hp != nil && hp != float64(0) {
				*notApplied = append(*notApplied, at+".host_port (no port is published on the host: the preview URL reaches it)")
			}
			if pub, ok := v["public"]; ok && pub == true {
				*notApplied = append(*notApplied, at+".public (every preview is private to its chat's user)")
			}
		default:
			d.errPath(at, "%s: want a port number or {port, label}, got %v", at, v)
			continue
		}
		if why, ok := reservedPorts[p.Port]; ok {
			d.errPath(at, "%s: port %d is the sandbox's own (%s); pick another", at, p.Port, why)
			continue
		}
		if slices.ContainsFunc(into, func(q Port) bool { return q.Port == p.Port }) {
			d.errPath(at, "%s: port %d is declared twice", at, p.Port)
			continue
		}
		into = append(into, p)
	}
	if len(into) > MaxPorts {
		d.errPath(path, "%s: %d ports declared; at most %d", path, len(into), MaxPorts)
	}
	return into
}

// portNumber is v as a port number.
func portNumber(v any) (int, bool) {
	var f float64
	switch v := v.(type) {
	case float64:
		f = v
	case json.Number:
		n, err := v.Float64()
		if err != nil {
			return 0, false
		}
		f = n
	default:
		return 0, false
	}
	if f != float64(int(f)) || f < 1 || f > 65535 {
		return 0, false
	}
	return int(f), true
}
