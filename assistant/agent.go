package assistant

import (
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"

	"gopkg.in/yaml.v3"
)

// Connector roles of agent/agent.yml's system block: what
// "use::<role>" and an empty package.yao connector resolve to.
var connectorRoles = []string{"audio", "default", "heavy", "light", "vision"}

// agentKeys are agent/agent.yml's top-level keys (Yao agent/types): system
// and uses.default are honoured, the rest is Yao's own.
var agentKeys = []string{"cache", "kb", "runner", "search", "store", "system", "uses"}

// loadAgent reads agent/agent.yml (connector roles, the default assistant)
// and agent/prompts.yml (global prompts). Both are optional.
func (l *loader) loadAgent() *AgentSettings {
	s := &AgentSettings{Roles: map[string]string{}}
	dir := filepath.Join(l.root, AgentDir)
	abs := filepath.Join(dir, "agent.yml")
	if _, err := os.Stat(abs); err == nil {
		l.loadAgentYML(abs, s)
	}
	if p := filepath.Join(dir, PromptsFile); fileExists(p) {
		s.GlobalPrompts = l.loadPrompts(p, dir)
	}
	return s
}

func (l *loader) loadAgentYML(abs string, s *AgentSettings) {
	b, ok := l.read(abs)
	if !ok {
		return
	}
	file := l.rel(abs)
	errf := func(n *yaml.Node, sev Severity, format string, args ...any) {
		l.probs = append(l.probs, Problem{File: file, Line: n.Line, Col: n.Column, Msg: fmt.Sprintf(format, args...), Severity: sev})
	}
	var doc yaml.Node
	if err := yaml.Unmarshal(b, &doc); err != nil {
		l.probs = append(l.probs, yamlProblem(file, err))
		return
	}
	if len(doc.Content) == 0 {
		return
	}
	top := doc.Content[0]
	if top.Kind != yaml.MappingNode {
		errf(top, SeverityError, "want a mapping (system:, uses:, ...), got %s", yamlKind(top))
		return
	}
	var yaoOnly []string
	for i := 0; i+1 < len(top.Content); i += 2 {
		k, v := top.Content[i], top.Content[i+1]
		switch k.Value {
		case "system":
			if v.Kind != yaml.MappingNode {
				errf(v, SeverityError, "system: want a mapping of roles to connector ids, got %s", yamlKind(v))
				continue
			}
			for j := 0; j+1 < len(v.Content); j += 2 {
				rk, rv := v.Content[j], v.Content[j+1]
				if rv.Kind != yaml.ScalarNode {
					errf(rv, SeverityError, "system.%s: want a connector id, got %s", rk.Value, yamlKind(rv))
					continue
				}
				if !slices.Contains(connectorRoles, rk.Value) {
					// Per-agent overrides of Yao's system agents
					// (keyword, title, ...): agentbox has none.
					continue
				}
				id := rv.Value
				if name, isEnv := envRef(id); isEnv {
					// Yao resolves agent.yml's $ENV references at load.
					id = os.Getenv(name)
					if id == "" {
						errf(rv, SeverityWarning, "system.%s: %s is not set, so the role has no connector", rk.Value, name)
					}
				}
				if id != "" {
					s.Roles[rk.Value] = id
				}
			}
		case "runner":
			if v.Kind == yaml.ScalarNode {
				s.Runner = v.Value
			} else {
				errf(v, SeverityError, "runner: want a runner name, got %s", yamlKind(v))
			}
		case "uses":
			if v.Kind == yaml.MappingNode {
				for j := 0; j+1 < len(v.Content); j += 2 {
					if v.Content[j].Value == "default" && v.Content[j+1].Kind == yaml.ScalarNode {
						s.DefaultAssistant = v.Content[j+1].Value
					}
				}
			}
			yaoOnly = append(yaoOnly, "uses (but default)")
		default:
			if !slices.Contains(agentKeys, k.Value) {
				errf(k, SeverityError, "unknown field %q%s", k.Value, suggest(k.Value, agentKeys))
				continue
			}
			yaoOnly = append(yaoOnly, k.Value)
		}
	}
	if len(yaoOnly) > 0 {
		errf(top, SeverityWarning, "Yao-only settings, not used by agentbox: %s", strings.Join(yaoOnly, ", "))
	}
}

// resolveRole returns the connector of role, falling back to the default
// role the way Yao does; fellBack is set when it did.
func (s *AgentSettings) resolveRole(role string) (id string, fellBack bool) {
	if s == nil {
		return "", false
	}
	if id := s.Roles[role]; id != "" {
		return id, false
	}
	if id := s.Roles["default"]; id != "" {
		return id, role != "default"
	}
	return "", false
}

func fileExists(p string) bool {
	st, err := os.Stat(p)
	return err == nil && st.Mode().IsRegular()
}
