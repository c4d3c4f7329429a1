package skills

import (
	"bytes"
	"errors"
	"fmt"
	"regexp"
	"strconv"
	"strings"
	"unicode/utf8"

	"github.com/adrg/frontmatter"
	"gopkg.in/yaml.v3"
)

// Limits from the Agent Skills specification (agentskills.io).
const (
	MaxNameLen          = 64
	MaxDescriptionLen   = 1024
	MaxCompatibilityLen = 500
)

// namePattern is the specification's skill name: lowercase letters, digits
// and single hyphens, neither leading nor trailing.
var namePattern = regexp.MustCompile(`^[a-z0-9]+(-[a-z0-9]+)*$`)

// knownFields are the front-matter keys the specification defines.
var knownFields = []string{"allowed-tools", "compatibility", "description", "license", "metadata", "name"}

// fmParser parses one SKILL.md, collecting problems.
type fmParser struct {
	file  string
	probs []Problem
	// lineOff is added to YAML line numbers: the number of file lines
	// before the first line of the front matter's YAML.
	lineOff int
}

func (p *fmParser) errf(line, col int, format string, args ...any) {
	p.probs = append(p.probs, Problem{File: p.file, Line: line, Col: col, Msg: fmt.Sprintf(format, args...)})
}

func (p *fmParser) nodeErr(n *yaml.Node, format string, args ...any) {
	p.errf(n.Line+p.lineOff, n.Column, format, args...)
}

// splitFrontMatter separates SKILL.md into its front matter YAML (parsed
// into a node with yaml.v3) and body. startLine is the 1-based line of the
// opening "---" (0 when there is none).
func splitFrontMatter(data []byte) (doc *yaml.Node, body []byte, startLine int, err error) {
	data = bytes.TrimPrefix(data, []byte("\ufeff"))
	fm, body, ok := split(data)
	if !ok {
		// No front matter, or an opening line that is never closed:
		// closing it at the end tells the two apart.
		closed := append(data[:len(data):len(data)], "\n---\n"...)
		if fm, rest, ok := split(closed); ok {
			return nil, nil, openingLine(closed, fm, rest), errUnclosed
		}
		return nil, data, 0, nil
	}
	startLine = openingLine(data, fm, body)
	var node yaml.Node
	if err := yaml.Unmarshal(fm, &node); err != nil {
		return nil, nil, startLine, err
	}
	return &node, body, startLine, nil
}

// split has adrg/frontmatter find the front matter: the first non-blank
// line is "---" and the YAML runs to the next "---" line. ok is false when
// there is none.
func split(data []byte) (fm, body []byte, ok bool) {
	format := frontmatter.NewFormat("---", "---", func(b []byte, _ any) error {
		fm, ok = bytes.Clone(b), true
		return nil
	})
	body, err := frontmatter.Parse(bytes.NewReader(data), nil, format)
	if err != nil || !ok {
		return nil, data, false // reading from memory does not fail
	}
	return fm, body, true
}

// openingLine returns the line of the opening "---" of front matter fm that
// split took off data before body: the YAML follows the opening line and
// is followed by one closing line.
func openingLine(data, fm, body []byte) int {
	front := data[:len(data)-len(body)]
	lines := bytes.Count(front, []byte("\n"))
	if len(front) > 0 && front[len(front)-1] != '\n' {
		lines++ // the closing line ends the file without a newline
	}
	return lines - bytes.Count(fm, []byte("\n")) - 1
}

var errUnclosed = errors.New("front matter is not closed: add a line with --- after it")

// yamlLine matches yaml.v3's "yaml: line N: msg" errors.
var yamlLine = regexp.MustCompile(`^yaml: line (\d+): (.*)$`)

// parseSkill parses and validates SKILL.md's front matter. file names the
// file in problems; folder is the skill folder's name, which the skill's
// name must equal. It never panics: a panic inside the YAML parser becomes
// a problem.
func parseSkill(file string, data []byte, folder string) (s *Skill, probs []Problem) {
	p := &fmParser{file: file}
	defer func() {
		if r := recover(); r != nil {
			s = nil
			probs = append(p.probs, Problem{File: file, Line: 1, Col: 1, Msg: fmt.Sprintf("front matter: unparsable YAML (%v)", r)})
		}
	}()
	doc, _, start, err := splitFrontMatter(data)
	if start == 0 {
		p.errf(1, 1, "missing front matter: SKILL.md must start with --- followed by name and description")
		return nil, p.probs
	}
	p.lineOff = start
	if err != nil {
		if errors.Is(err, errUnclosed) {
			p.errf(start, 1, "%v", err)
			return nil, p.probs
		}
		line, msg := start, err.Error()
		var te *yaml.TypeError
		if m := yamlLine.FindStringSubmatch(msg); m != nil {
			n, _ := strconv.Atoi(m[1])
			line, msg = start+n, m[2]
		} else if errors.As(err, &te) {
			msg = strings.Join(te.Errors, "; ")
		}
		msg = strings.TrimPrefix(msg, "yaml: ")
		p.errf(line, 1, "front matter: %s", msg)
		return nil, p.probs
	}
	s = &Skill{}
	if doc.Kind == 0 || len(doc.Content) == 0 {
		p.errf(start, 1, "front matter is empty: name and description are required")
		return nil, p.probs
	}
	m := doc.Content[0]
	if m.Kind != yaml.MappingNode {
		p.nodeErr(m, "front matter must be a mapping of fields (name: ..., description: ...)")
		return nil, p.probs
	}
	seen := map[string]bool{}
	var nameNode, descNode *yaml.Node
	for i := 0; i+1 < len(m.Content); i += 2 {
		k, v := m.Content[i], m.Content[i+1]
		key := k.Value
		if k.Kind != yaml.ScalarNode {
			p.nodeErr(k, "front-matter keys must be plain names")
			continue
		}
		if seen[key] {
			p.nodeErr(k, "duplicate front-matter field %q", key)
			continue
		}
		seen[key] = true
		switch key {
		case "name":
			nameNode = v
			s.Name, _ = p.scalar(key, v)
		case "description":
			descNode = v
			s.Description, _ = p.scalar(key, v)
		case "license":
			s.License, _ = p.scalar(key, v)
		case "compatibility":
			if c, ok := p.scalar(key, v); ok {
				s.Compatibility = c
				if n := utf8.RuneCountInString(c); n > MaxCompatibilityLen {
					p.nodeErr(v, "compatibility is %d characters long; the limit is %d", n, MaxCompatibilityLen)
				}
			}
		case "metadata":
			s.Metadata = p.stringMap(key, v)
		case "allowed-tools":
			s.AllowedTools = p.tools(key, v)
		default:
			p.nodeErr(k, "unknown front-matter field %q (known: %s)", key, strings.Join(knownFields, ", "))
		}
	}
	switch {
	case nameNode == nil:
		p.errf(start, 1, "name is required")
	case s.Name == "":
		p.nodeErr(nameNode, "name is empty")
	default:
		p.checkName(nameNode, s.Name, folder)
	}
	switch {
	case descNode == nil:
		p.errf(start, 1, "description is required: say what the skill does and when to use it")
	case strings.TrimSpace(s.Description) == "":
		p.nodeErr(descNode, "description is empty")
	default:
		if n := utf8.RuneCountInString(s.Description); n > MaxDescriptionLen {
			p.nodeErr(descNode, "description is %d characters long; the limit is %d", n, MaxDescriptionLen)
		}
	}
	if len(p.probs) > 0 {
		return nil, p.probs
	}
	return s, nil
}

func (p *fmParser) checkName(n *yaml.Node, name, folder string) {
	switch {
	case utf8.RuneCountInString(name) > MaxNameLen:
		p.nodeErr(n, "name %q is longer than %d characters", name, MaxNameLen)
	case !namePattern.MatchString(name):
		p.nodeErr(n, "invalid name %q: use lowercase letters, digits and single hyphens, not at the start or end", name)
	case name != folder:
		p.nodeErr(n, "name %q must equal its folder name %q", name, folder)
	}
}

// scalar returns v's text when it is a non-null scalar.
func (p *fmParser) scalar(key string, v *yaml.Node) (string, bool) {
	if v.Kind == yaml.AliasNode && v.Alias != nil {
		v = v.Alias
	}
	if v.Kind != yaml.ScalarNode {
		p.nodeErr(v, "%s: want a string, got %s", key, kindName(v))
		return "", false
	}
	if v.Tag == "!!null" {
		return "", true
	}
	return v.Value, true
}

func (p *fmParser) stringMap(key string, v *yaml.Node) map[string]string {
	if v.Kind == yaml.ScalarNode && v.Tag == "!!null" {
		return nil
	}
	if v.Kind != yaml.MappingNode {
		p.nodeErr(v, "%s: want a mapping of strings, got %s", key, kindName(v))
		return nil
	}
	out := make(map[string]string, len(v.Content)/2)
	for i := 0; i+1 < len(v.Content); i += 2 {
		k, val := v.Content[i], v.Content[i+1]
		if k.Kind != yaml.ScalarNode {
			p.nodeErr(k, "%s: keys must be strings", key)
			continue
		}
		if _, dup := out[k.Value]; dup {
			p.nodeErr(k, "%s: duplicate key %q", key, k.Value)
			continue
		}
		if s, ok := p.scalar(key+"."+k.Value, val); ok {
			out[k.Value] = s
		}
	}
	return out
}

// tools accepts the specification's space-delimited string and, as seed
// examples show, a YAML list, which is joined with spaces.
func (p *fmParser) tools(key string, v *yaml.Node) string {
	if v.Kind == yaml.SequenceNode {
		parts := make([]string, 0, len(v.Content))
		for _, e := range v.Content {
			if s, ok := p.scalar(key, e); ok && strings.TrimSpace(s) != "" {
				parts = append(parts, strings.TrimSpace(s))
			}
		}
		return strings.Join(parts, " ")
	}
	if v.Kind == yaml.ScalarNode {
		s, _ := p.scalar(key, v)
		return strings.Join(strings.Fields(s), " ")
	}
	p.nodeErr(v, "%s: want a string or a list of strings, got %s", key, kindName(v))
	return ""
}

func kindName(n *yaml.Node) string {
	switch n.Kind {
	case yaml.MappingNode:
		return "a mapping"
	case yaml.SequenceNode:
		return "a list"
	case yaml.AliasNode:
		return "an alias"
	case yaml.ScalarNode:
		return "a scalar"
	}
	return "nothing"
}
