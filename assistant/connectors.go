package assistant

import (
	"net/url"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"

	"github.com/agentbox/agentbox/llmtest"
)

// Connector types.
const (
	TypeOpenAI    = "openai"
	TypeAnthropic = "anthropic"
	TypeScripted  = "scripted"
)

var connectorTypes = []string{TypeAnthropic, TypeOpenAI, TypeScripted}

// rawConnector is a connectors/**/NAME.conn.yao file as written.
type rawConnector struct {
	Type        string         `json:"type"`
	Label       string         `json:"label"`
	Description string         `json:"description"`
	Options     map[string]any `json:"options"`
}

// loadConnectors loads every connector definition under connectors/, by id.
func (l *loader) loadConnectors() map[string]*Connector {
	files := l.defFiles(filepath.Join(l.root, ConnectorsDir), connSuffix)
	l.connIDs = map[string]bool{}
	out := make(map[string]*Connector, len(files))
	for id, abs := range files {
		l.connIDs[id] = true
		if c := l.loadConnector(id, abs); c != nil {
			out[id] = c
		}
	}
	return out
}

// loadConnector checks one connector file; nil when it has problems.
func (l *loader) loadConnector(id, abs string) *Connector {
	var raw rawConnector
	d := l.decode(abs, &raw)
	if d == nil || d.broken {
		l.done(d)
		return nil
	}
	c := &Connector{ID: id, Type: raw.Type, Label: raw.Label, File: l.rel(abs)}
	switch {
	case d.bad["type"]:
	case raw.Type == "":
		d.errPath("type", "type is required (%s)", strings.Join(connectorTypes, ", "))
	case !oneOf(raw.Type, connectorTypes...):
		d.errPath("type", "unknown connector type %q (known: %s)", raw.Type, strings.Join(connectorTypes, ", "))
	}
	str := func(name string) string {
		v, ok := raw.Options[name]
		if !ok || v == nil {
			return ""
		}
		s, ok := v.(string)
		if !ok {
			d.bad["options."+name] = true
			d.errPath("options."+name, "options.%s: want a string, got %s", name, goKind(v))
			return ""
		}
		if msg := checkEnvRef(s); msg != "" {
			if name == "key" {
				// Never quote what may be a secret.
				msg = "invalid environment reference: want $ENV.NAME with letters, digits and underscores"
			}
			d.errPath("options."+name, "options.%s: %s", name, msg)
		}
		return s
	}
	o := ConnectorOptions{Host: str("host"), Key: str("key"), Model: str("model"), Script: str("script")}
	for k, v := range raw.Options {
		switch k {
		case "host", "key", "model", "script":
			continue
		}
		if o.Extra == nil {
			o.Extra = map[string]any{}
		}
		o.Extra[k] = v
	}
	if o.Host != "" {
		if _, isEnv := envRef(o.Host); !isEnv {
			if u, err := url.Parse(o.Host); err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
				d.errPath("options.host", "options.host: want an http(s) URL like \"https://api.openai.com\", got %q", o.Host)
			}
		}
	}
	switch raw.Type {
	case TypeScripted:
		if d.bad["options.script"] {
			break
		}
		if o.Script == "" {
			d.errPath("options", "options.script is required for a scripted connector: the path of an llmtest script, relative to this file")
			break
		}
		if _, isEnv := envRef(o.Script); isEnv {
			d.errPath("options.script", "options.script cannot come from the environment")
			break
		}
		p := o.Script
		if !filepath.IsAbs(p) {
			p = filepath.Join(filepath.Dir(abs), p)
		}
		if st, err := os.Stat(p); err != nil || !st.Mode().IsRegular() {
			d.errPath("options.script", "options.script: no script file %s", l.rel(p))
		} else {
			l.checkScript(p)
		}
		o.Script = filepath.Clean(p)
	case TypeAnthropic, TypeOpenAI:
		if o.Script != "" {
			d.errPath("options.script", "options.script is only for scripted connectors")
		}
		if o.Model == "" && !d.bad["options.model"] {
			d.errPath("options", "options.model is required for an %s connector", raw.Type)
		}
		if raw.Type == TypeAnthropic && o.Key == "" && !d.bad["options.key"] {
			d.errPath("options", "options.key is required for an anthropic connector (use \"$ENV.ANTHROPIC_API_KEY\")")
		}
	}
	c.Options = o
	if !l.done(d) {
		return nil
	}
	return c
}

// scriptPos matches the "LINE:COL: msg" errors of llmtest.ParseScript.
var scriptPos = regexp.MustCompile(`^(\d+):(\d+):\s*(.*)$`)

// checkScript validates a scripted connector's llmtest script, so a broken
// demo script is found at load time like any other file.
func (l *loader) checkScript(abs string) {
	b, err := readConfig(abs)
	if err != nil {
		l.fileProblem(abs, "%v", unwrapPath(err))
		return
	}
	_, err = llmtest.ParseScript(b, filepath.Ext(abs))
	if err == nil {
		return
	}
	for _, line := range strings.Split(err.Error(), "\n") {
		p := Problem{File: l.rel(abs), Line: 1, Col: 1, Msg: line}
		if m := scriptPos.FindStringSubmatch(line); m != nil {
			p.Line, _ = strconv.Atoi(m[1])
			p.Col, _ = strconv.Atoi(m[2])
			p.Msg = m[3]
		}
		p.Msg = "script: " + p.Msg
		l.probs = append(l.probs, p)
	}
}
