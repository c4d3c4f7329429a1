package assistant

import (
	"bytes"
	"fmt"
	"regexp"
	"strconv"
	"strings"

	"gopkg.in/yaml.v3"

	"github.com/agentbox/agentbox/chat"
)

// yamlLine matches yaml.v3's "yaml: line N: msg" errors.
var yamlLine = regexp.MustCompile(`^yaml: line (\d+): (.*)$`)

// loadPrompts reads prompts.yml.
func (l *loader) loadPrompts(abs string) []chat.Message {
	b, ok := l.read(abs)
	if !ok {
		return nil
	}
	msgs, probs := parsePrompts(l.rel(abs), b)
	l.probs = append(l.probs, probs...)
	return msgs
}

// parsePrompts parses a prompts file: a YAML list of {role, content} with
// role system, user or assistant. It never panics; a panic in the YAML
// parser becomes a problem.
func parsePrompts(file string, src []byte) (msgs []chat.Message, probs []Problem) {
	errf := func(line, col int, format string, args ...any) {
		probs = append(probs, Problem{File: file, Line: line, Col: col, Msg: fmt.Sprintf(format, args...)})
	}
	defer func() {
		if r := recover(); r != nil {
			msgs = nil
			errf(1, 1, "unparsable YAML (%v)", r)
		}
	}()
	if len(bytes.TrimSpace(src)) == 0 {
		return nil, nil
	}
	var doc yaml.Node
	if err := yaml.Unmarshal(src, &doc); err != nil {
		line, msg := 1, strings.TrimPrefix(err.Error(), "yaml: ")
		if m := yamlLine.FindStringSubmatch(err.Error()); m != nil {
			line, _ = strconv.Atoi(m[1])
			msg = m[2]
		}
		errf(line, 1, "YAML syntax error: %s", msg)
		return nil, probs
	}
	if len(doc.Content) == 0 {
		return nil, nil
	}
	list := doc.Content[0]
	if list.Kind != yaml.SequenceNode {
		errf(list.Line, list.Column, "want a list of messages (- role: system\\n  content: ...), got %s", yamlKind(list))
		return nil, probs
	}
	for i, item := range list.Content {
		if item.Kind != yaml.MappingNode {
			errf(item.Line, item.Column, "message %d: want role and content, got %s", i+1, yamlKind(item))
			continue
		}
		var m chat.Message
		var hasRole, hasContent bool
		for j := 0; j+1 < len(item.Content); j += 2 {
			k, v := item.Content[j], item.Content[j+1]
			switch k.Value {
			case "role", "content":
			default:
				errf(k.Line, k.Column, "message %d: unknown field %q (known: role, content)", i+1, k.Value)
				continue
			}
			if v.Kind != yaml.ScalarNode || v.Tag == "!!null" {
				errf(v.Line, v.Column, "message %d: %s: want a string, got %s", i+1, k.Value, yamlKind(v))
				continue
			}
			if k.Value == "role" {
				if hasRole {
					errf(k.Line, k.Column, "message %d: duplicate field \"role\"", i+1)
				}
				hasRole, m.Role = true, v.Value
				if !oneOf(v.Value, chat.RoleSystem, chat.RoleUser, chat.RoleAssistant) {
					errf(v.Line, v.Column, "message %d: unknown role %q (known: system, user, assistant)", i+1, v.Value)
				}
			} else {
				if hasContent {
					errf(k.Line, k.Column, "message %d: duplicate field \"content\"", i+1)
				}
				hasContent, m.Content = true, v.Value
			}
		}
		if !hasRole {
			errf(item.Line, item.Column, "message %d: role is required (system, user or assistant)", i+1)
		}
		if !hasContent {
			errf(item.Line, item.Column, "message %d: content is required", i+1)
		}
		msgs = append(msgs, m)
	}
	if len(probs) > 0 {
		return nil, probs
	}
	return msgs, nil
}

func yamlKind(n *yaml.Node) string {
	switch n.Kind {
	case yaml.MappingNode:
		return "a mapping"
	case yaml.SequenceNode:
		return "a list"
	case yaml.AliasNode:
		return "an alias"
	case yaml.ScalarNode:
		if n.Tag == "!!null" {
			return "nothing"
		}
		return "a scalar"
	}
	return "nothing"
}
