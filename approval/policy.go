// Package approval is tool approval: a policy (package.yao and app.jsonc
// "approval") whose rules say which tool calls of an agent are allowed,
// denied or asked of the chat's user, and the Broker that holds an asked
// call until its user answers or its time runs out.
//
// Rules are written in Claude Code's permission syntax: a tool name
// ("Bash", "WebSearch", "mcp__github__create_issue", "mcp__github" for
// every tool of a server, "*" for every tool), optionally with an argument
// pattern in parentheses: "Bash(git push:*)" (a command and what follows
// it), "Bash(npm test)" (that command; "*" matches any text),
// "Edit(src/**)" (a file under src/ of the workspace; "*" within one
// folder, "**" across folders, a leading "/" an absolute path),
// "WebFetch(domain:example.com)" (that host and its subdomains).
package approval

import (
	"encoding/json"
	"fmt"
	"net/url"
	"path"
	"regexp"
	"strings"
	"time"
)

// DefaultTimeout is how long a call waits for its answer when the policy
// sets no timeout.
const DefaultTimeout = 2 * time.Minute

// MaxTimeout bounds a policy's timeout: a turn should not hang on a
// question for longer than a working day.
const MaxTimeout = 24 * time.Hour

// Verdict is what a policy says of one call.
type Verdict string

// Verdicts.
const (
	Allow Verdict = "allow"
	Deny  Verdict = "deny"
	Ask   Verdict = "ask"
)

// Policy is a checked approval policy. The zero value allows every call.
// Deny rules win over ask rules, ask rules over allow rules; a call no rule
// names is allowed (the sandbox confines it, as without a policy).
type Policy struct {
	Ask, Allow, Deny []Rule
	// Timeout is how long an asked call waits for its answer; then it is
	// denied, with a reason the agent reads.
	Timeout time.Duration
}

// Raw is the policy as written in package.yao or app.jsonc.
type Raw struct {
	Ask     []string `json:"ask"`
	Allow   []string `json:"allow"`
	Deny    []string `json:"deny"`
	Timeout string   `json:"timeout"`
}

// Problem is one thing wrong with a written policy: Path names the member
// ("ask[2]", "timeout") relative to the policy.
type Problem struct {
	Path, Message string
}

// Parse checks a written policy. parseDuration reads the timeout (the
// app's one duration parser); every problem is returned, none is dropped.
func Parse(r Raw, parseDuration func(string) (time.Duration, error)) (*Policy, []Problem) {
	p := &Policy{Timeout: DefaultTimeout}
	var probs []Problem
	for _, list := range []struct {
		name string
		in   []string
		out  *[]Rule
	}{{"deny", r.Deny, &p.Deny}, {"ask", r.Ask, &p.Ask}, {"allow", r.Allow, &p.Allow}} {
		for i, s := range list.in {
			rule, err := ParseRule(s)
			if err != nil {
				probs = append(probs, Problem{fmt.Sprintf("%s[%d]", list.name, i), fmt.Sprintf("%s[%d] %q: %v", list.name, i, s, err)})
				continue
			}
			*list.out = append(*list.out, rule)
		}
	}
	if r.Timeout != "" {
		d, err := parseDuration(r.Timeout)
		switch {
		case err != nil:
			probs = append(probs, Problem{"timeout", fmt.Sprintf("timeout %q: %v (want a duration such as \"2m\")", r.Timeout, err)})
		case d <= 0 || d > MaxTimeout:
			probs = append(probs, Problem{"timeout", fmt.Sprintf("timeout %q is out of range: want more than 0 and at most 24h", r.Timeout)})
		default:
			p.Timeout = d
		}
	}
	return p, probs
}

// Empty reports whether p has no rule (it allows everything).
func (p *Policy) Empty() bool {
	return p == nil || len(p.Ask)+len(p.Allow)+len(p.Deny) == 0
}

// Asks reports whether p can ask anything.
func (p *Policy) Asks() bool { return p != nil && len(p.Ask) > 0 }

// Decide says what p makes of a call of tool with input (a JSON object;
// file paths are read relative to workdir), and the rule that said so
// ("" for a call no rule names, which is allowed).
func (p *Policy) Decide(tool string, input json.RawMessage, workdir string) (Verdict, string) {
	if p == nil {
		return Allow, ""
	}
	c := newCall(tool, input, workdir)
	for _, l := range []struct {
		v     Verdict
		rules []Rule
	}{{Deny, p.Deny}, {Ask, p.Ask}, {Allow, p.Allow}} {
		for _, r := range l.rules {
			if r.matches(c) {
				return l.v, r.Text
			}
		}
	}
	return Allow, ""
}

// ReadOnly are Claude Code's tools that read, list or search the
// workspace: it runs them without asking, so an ask rule for one is never
// asked (Parse's callers refuse it), and its deny rules are the CLI's own
// (--disallowedTools).
var ReadOnly = map[string]bool{"Read": true, "NotebookRead": true, "Glob": true, "Grep": true, "LS": true}

// Rule is one checked rule.
type Rule struct {
	// Text is the rule as written.
	Text string
	// name is its tool pattern as written.
	name string
	tool *regexp.Regexp
	// spec is the argument pattern (nil: any arguments).
	spec func(c *call) bool
}

var (
	toolNameRE = regexp.MustCompile(`^[A-Za-z0-9_*-]+$`)
	// fileTools take a path pattern (file_path, or notebook_path).
	fileTools = map[string]bool{"Edit": true, "MultiEdit": true, "Write": true, "Read": true, "NotebookEdit": true, "NotebookRead": true}
)

// ParseRule checks one rule.
func ParseRule(s string) (Rule, error) {
	r := Rule{Text: s}
	name, spec := s, ""
	if i := strings.IndexByte(s, '('); i >= 0 {
		if !strings.HasSuffix(s, ")") {
			return r, fmt.Errorf("an argument pattern ends with \")\": write Tool(pattern), as in Bash(git push:*)")
		}
		name, spec = s[:i], s[i+1:len(s)-1]
		if strings.TrimSpace(spec) == "" {
			return r, fmt.Errorf("empty argument pattern: leave out the parentheses to match every call of %s", name)
		}
	}
	if !toolNameRE.MatchString(name) {
		return r, fmt.Errorf("want a tool name (Bash, Edit, mcp__server__tool, * for any) with an optional (pattern)")
	}
	r.name, r.tool = name, toolPattern(name)
	if spec == "" {
		return r, nil
	}
	switch {
	case name == "Bash":
		r.spec = bashSpec(spec)
	case fileTools[name]:
		re, err := pathGlob(spec)
		if err != nil {
			return r, err
		}
		r.spec = func(c *call) bool { return c.path != "" && re.MatchString(c.path) }
	case name == "WebFetch":
		host, ok := strings.CutPrefix(spec, "domain:")
		if !ok || host == "" {
			return r, fmt.Errorf("WebFetch takes domain:HOST (WebFetch(domain:example.com))")
		}
		host = strings.ToLower(host)
		r.spec = func(c *call) bool {
			h := strings.ToLower(c.host)
			return h == host || strings.HasSuffix(h, "."+host)
		}
	case name == "WebSearch":
		re := textGlob(spec)
		r.spec = func(c *call) bool { return re.MatchString(c.str("query")) }
	default:
		return r, fmt.Errorf("%s takes no argument pattern (Bash, Edit, MultiEdit, Write, Read, NotebookEdit, WebFetch and WebSearch do): write %s alone", name, name)
	}
	return r, nil
}

// Tool is the tool (or tool pattern) the rule names.
func (r Rule) Tool() string { return r.name }

func (r Rule) matches(c *call) bool {
	if !r.tool.MatchString(c.tool) {
		return false
	}
	return r.spec == nil || r.spec(c)
}

// toolPattern matches a tool name: "*" any run of characters, and an MCP
// server's name ("mcp__github") every tool of that server.
func toolPattern(name string) *regexp.Regexp {
	q := strings.ReplaceAll(regexp.QuoteMeta(name), `\*`, `.*`)
	if strings.HasPrefix(name, "mcp__") && !strings.Contains(name[len("mcp__"):], "__") && !strings.HasSuffix(name, "*") {
		q += `(__.*)?`
	}
	return regexp.MustCompile(`^` + q + `$`)
}

// bashSpec is a Bash command pattern: "PREFIX:*" the command PREFIX with
// or without more words, else a glob of the whole command.
func bashSpec(spec string) func(c *call) bool {
	if prefix, ok := strings.CutSuffix(spec, ":*"); ok {
		return func(c *call) bool {
			cmd := strings.TrimSpace(c.str("command"))
			return cmd == prefix || strings.HasPrefix(cmd, prefix+" ")
		}
	}
	re := textGlob(spec)
	return func(c *call) bool { return re.MatchString(strings.TrimSpace(c.str("command"))) }
}

// textGlob matches text with "*" for any run of characters.
func textGlob(spec string) *regexp.Regexp {
	return regexp.MustCompile(`(?s)^` + strings.ReplaceAll(regexp.QuoteMeta(spec), `\*`, `.*`) + `$`)
}

// pathGlob matches a slash path: "**" across folders, "*" and "?" within
// one. A pattern without a leading "/" is relative to the workspace.
func pathGlob(spec string) (*regexp.Regexp, error) {
	spec = strings.TrimPrefix(spec, "./")
	if strings.HasPrefix(spec, "//") { // Claude Code's absolute form
		spec = spec[1:]
	}
	if strings.HasPrefix(spec, "~") {
		return nil, fmt.Errorf("a path pattern is relative to the workspace or absolute (/...), not under ~")
	}
	var b strings.Builder
	b.WriteString("^")
	for i := 0; i < len(spec); i++ {
		switch ch := spec[i]; {
		case strings.HasPrefix(spec[i:], "**/"):
			b.WriteString(`(.*/)?`)
			i += 2
		case strings.HasPrefix(spec[i:], "**"):
			b.WriteString(`.*`)
			i++
		case ch == '*':
			b.WriteString(`[^/]*`)
		case ch == '?':
			b.WriteString(`[^/]`)
		default:
			b.WriteString(regexp.QuoteMeta(string(ch)))
		}
	}
	b.WriteString("$")
	return regexp.Compile(b.String())
}

// call is a tool call as the rules read it.
type call struct {
	tool string
	in   map[string]any
	// path is a file tool's path, relative to the workspace when inside
	// it; host is WebFetch's URL's host.
	path, host string
}

func newCall(tool string, input json.RawMessage, workdir string) *call {
	c := &call{tool: tool}
	_ = json.Unmarshal(input, &c.in) // a call whose input is no object matches no pattern
	if p := c.str("file_path"); p != "" || c.str("notebook_path") != "" {
		if p == "" {
			p = c.str("notebook_path")
		}
		p = path.Clean(p)
		if workdir != "" {
			if rel, ok := strings.CutPrefix(p, strings.TrimSuffix(workdir, "/")+"/"); ok {
				p = rel
			}
		}
		c.path = p
	}
	if u, err := url.Parse(c.str("url")); err == nil {
		c.host = u.Hostname()
	}
	return c
}

func (c *call) str(k string) string {
	s, _ := c.in[k].(string)
	return s
}
