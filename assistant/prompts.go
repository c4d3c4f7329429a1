package assistant

import (
	"bytes"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"sort"
	"strconv"
	"strings"

	"gopkg.in/yaml.v3"

	"github.com/agentbox/agentbox/chat"
)

// yamlLine matches yaml.v3's "yaml: line N: msg" errors.
var yamlLine = regexp.MustCompile(`^yaml: line (\d+): (.*)$`)

// assetRef is a reference Yao replaces with an asset file's content before
// parsing a prompts file (Yao agent/store/types/prompt.go).
var assetRef = regexp.MustCompile(`@assets/([^\s]+\.(md|yml|yaml|json|txt))`)

// promptRoles are the roles a prompt may have. developer (OpenAI's newer
// name for system) is sent as it is, as Yao sends it; providers without it
// take it as system.
var promptRoles = []string{chat.RoleSystem, chat.RoleUser, chat.RoleAssistant, chat.RoleDeveloper}

// loadPrompts reads a prompts file; @assets/ references resolve in
// assetRoot's assets/ folder.
func (l *loader) loadPrompts(abs, assetRoot string) []chat.Message {
	b, ok := l.read(abs)
	if !ok {
		return nil
	}
	file := l.rel(abs)
	src, lines := l.expandAssets(file, b, assetRoot)
	msgs, probs := parsePrompts(file, src)
	for i := range probs {
		probs[i].Line = lines.original(probs[i].Line)
	}
	l.probs = append(l.probs, probs...)
	return msgs
}

// loadPresets reads the prompt presets of an assistant's prompts/ folder:
// every .yml or .yaml file, keyed by its path without the extension,
// '/' turned into '.' ("chat.friendly" for prompts/chat/friendly.yml).
func (l *loader) loadPresets(dir, assetRoot string) map[string][]chat.Message {
	out := map[string][]chat.Message{}
	l.walk(dir, func(p string) {
		ext := filepath.Ext(p)
		if ext != ".yml" && ext != ".yaml" {
			return
		}
		rel, _ := filepath.Rel(dir, p)
		key := strings.ReplaceAll(filepath.ToSlash(strings.TrimSuffix(rel, ext)), "/", ".")
		if _, dup := out[key]; dup {
			l.fileProblem(p, "preset %q is also defined by a file with the other extension", key)
			return
		}
		out[key] = l.loadPrompts(p, assetRoot)
	})
	return out
}

// lineMap maps lines of a prompts file after @assets/ expansion back to
// the file's own lines: one entry per reference, in file order, with the
// line it is on (in the expanded text and in the file) and the number of
// lines its asset added.
type lineMap []struct{ at, orig, added int }

// original returns the file line of expanded line n.
func (m lineMap) original(n int) int {
	for i := len(m) - 1; i >= 0; i-- {
		e := m[i]
		switch {
		case n > e.at+e.added:
			n -= e.added
		case n > e.at:
			return e.orig // inside the inserted asset: the reference's line
		}
	}
	return n
}

// expandAssets replaces each @assets/<path> reference with a YAML block
// scalar holding assetRoot/assets/<path>, as Yao does before parsing. A
// missing asset becomes empty (Yao's meaning) with a warning; a path that
// leaves assets/ is an error.
func (l *loader) expandAssets(file string, src []byte, assetRoot string) ([]byte, lineMap) {
	if !bytes.Contains(src, []byte("@assets/")) {
		return src, nil
	}
	var lines lineMap
	assets := filepath.Join(assetRoot, AssetsDir)
	var out bytes.Buffer
	last := 0
	for _, m := range assetRef.FindAllSubmatchIndex(src, -1) {
		out.Write(src[last:m[0]])
		last = m[1]
		line, col := lineCol(src, m[0])
		name := string(src[m[2]:m[3]])
		rel := filepath.FromSlash(name)
		var content []byte
		if !filepath.IsLocal(rel) {
			l.probs = append(l.probs, Problem{File: file, Line: line, Col: col, Msg: fmt.Sprintf("@assets/%s is outside the assets folder", name)})
		} else if b, err := readConfig(filepath.Join(assets, rel)); err == nil {
			content = b
		} else if errors.Is(err, os.ErrNotExist) {
			l.probs = append(l.probs, Problem{File: file, Line: line, Col: col, Severity: SeverityWarning,
				Msg: fmt.Sprintf("@assets/%s: no such file in %s; it reads as empty (as in Yao)", name, l.rel(assets))})
		} else {
			l.probs = append(l.probs, Problem{File: file, Line: line, Col: col, Msg: fmt.Sprintf("@assets/%s: %v", name, unwrapPath(err))})
		}
		// Yao's block: "|", then every line of the file indented by 4.
		out.WriteString("|\n")
		parts := strings.Split(string(content), "\n")
		for _, p := range parts {
			out.WriteString("    ")
			out.WriteString(p)
			out.WriteString("\n")
		}
		lines = append(lines, struct{ at, orig, added int }{line + sum(lines), line, len(parts) + 1})
	}
	out.Write(src[last:])
	return out.Bytes(), lines
}

func sum(m lineMap) int {
	n := 0
	for _, e := range m {
		n += e.added
	}
	return n
}

// yamlProblem turns a yaml.v3 error into a positioned problem.
func yamlProblem(file string, err error) Problem {
	line, msg := 1, strings.TrimPrefix(err.Error(), "yaml: ")
	if m := yamlLine.FindStringSubmatch(err.Error()); m != nil {
		line, _ = strconv.Atoi(m[1])
		msg = m[2]
	}
	return Problem{File: file, Line: line, Col: 1, Msg: "YAML syntax error: " + msg}
}

// parsePrompts parses a prompts file: a YAML list of {role, content,
// name} with role system, user, assistant or developer. It never panics;
// a panic in the YAML parser becomes a problem.
func parsePrompts(file string, src []byte) (msgs []chat.Message, probs []Problem) {
	defer func() {
		if r := recover(); r != nil {
			msgs = nil
			probs = append(probs, Problem{File: file, Line: 1, Col: 1, Msg: fmt.Sprintf("unparsable YAML (%v)", r)})
		}
	}()
	if len(bytes.TrimSpace(src)) == 0 {
		return nil, nil
	}
	var doc yaml.Node
	if err := yaml.Unmarshal(src, &doc); err != nil {
		return nil, []Problem{yamlProblem(file, err)}
	}
	if len(doc.Content) == 0 {
		return nil, nil
	}
	return promptsFromNode(file, doc.Content[0])
}

// promptsFromNode checks a YAML list of prompts.
func promptsFromNode(file string, list *yaml.Node) (msgs []chat.Message, probs []Problem) {
	errf := func(line, col int, format string, args ...any) {
		probs = append(probs, Problem{File: file, Line: line, Col: col, Msg: fmt.Sprintf(format, args...)})
	}
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
		seen := map[string]bool{}
		for j := 0; j+1 < len(item.Content); j += 2 {
			k, v := item.Content[j], item.Content[j+1]
			switch k.Value {
			case "role", "content", "name":
			default:
				errf(k.Line, k.Column, "message %d: unknown field %q%s", i+1, k.Value, suggest(k.Value, []string{"content", "name", "role"}))
				continue
			}
			if seen[k.Value] {
				errf(k.Line, k.Column, "message %d: duplicate field %q", i+1, k.Value)
			}
			seen[k.Value] = true
			if v.Kind != yaml.ScalarNode || (v.Tag == "!!null" && k.Value != "content") {
				errf(v.Line, v.Column, "message %d: %s: want a string, got %s", i+1, k.Value, yamlKind(v))
				continue
			}
			val := v.Value
			if v.Tag == "!!null" {
				val = ""
			}
			switch k.Value {
			case "role":
				m.Role = val
				if !oneOf(val, promptRoles...) {
					errf(v.Line, v.Column, "message %d: unknown role %q (known: %s)", i+1, val, strings.Join(promptRoles, ", "))
				}
			case "content":
				m.Content = val
			case "name":
				m.Name = val
			}
		}
		if !seen["role"] {
			errf(item.Line, item.Column, "message %d: role is required (system, user, assistant or developer)", i+1)
		}
		msgs = append(msgs, m)
	}
	if hasErrors(probs) {
		return nil, probs
	}
	return msgs, probs
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

// secretName matches environment variable names that look like secrets.
var secretName = regexp.MustCompile(`(?i)(KEY|TOKEN|SECRET|PASSWORD|PASSWD|CREDENTIAL)`)

// envInPrompt finds $ENV references in prompt text.
var envInPrompt = regexp.MustCompile(`\$ENV\.([A-Za-z_][A-Za-z0-9_]*)`)

// checkPromptVars warns about $ENV references in prompts that look like
// secrets: Yao expands them into the text sent to the model.
func (l *loader) checkPromptVars(file string, msgs []chat.Message) {
	names := map[string]bool{}
	for _, m := range msgs {
		for _, g := range envInPrompt.FindAllStringSubmatch(m.Content, -1) {
			if secretName.MatchString(g[1]) {
				names[g[1]] = true
			}
		}
	}
	if len(names) == 0 {
		return
	}
	list := make([]string, 0, len(names))
	for n := range names {
		list = append(list, "$ENV."+n)
	}
	sort.Strings(list)
	l.probs = append(l.probs, Problem{File: file, Severity: SeverityWarning,
		Msg: fmt.Sprintf("%s in prompt text is expanded per request and sent to the model (as in Yao); it looks like a secret", strings.Join(list, ", "))})
}
