package assistant

import (
	"encoding/json"
	"fmt"
	"maps"
	"net/url"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"sort"
	"strconv"
	"strings"

	"github.com/agentbox/agentbox/connector"
	"github.com/agentbox/agentbox/scripted"
)

// Connector types.
const (
	TypeOpenAI    = "openai"
	TypeAnthropic = "anthropic"
	TypeScripted  = "scripted"
)

// connectorTypes are the model connector types agentbox calls.
var connectorTypes = []string{TypeAnthropic, TypeOpenAI, TypeScripted}

// skippedTypes are connector types Yao loads that are not chat models:
// agentbox reads such a file, says it skips it, and goes on (Yao
// connector/types.go). Why each is skipped is said in the warning.
var skippedTypes = map[string]string{
	"mysql":     "a database",
	"sqlite":    "a database",
	"sqlite3":   "a database",
	"postgres":  "a database",
	"oracle":    "a database",
	"redis":     "a cache",
	"mongo":     "a database",
	"fastembed": "an embedding model",
	"moapi":     "Yao's legacy model API",
}

// rawConnector is a connector file as written: Yao's connector DSL (type,
// name, version, options, auth_mode, supported_params and the MetaInfo
// fields).
type rawConnector struct {
	Type            string                         `json:"type"`
	Name            string                         `json:"name" yao:"lenient"`
	Label           string                         `json:"label" yao:"lenient"`
	Version         string                         `json:"version" yao:"lenient"`
	Description     string                         `json:"description" yao:"lenient"`
	Tags            stringList                     `json:"tags" yao:"lenient"`
	Readonly        bool                           `json:"readonly" yao:"lenient"`
	Builtin         bool                           `json:"builtin" yao:"lenient"`
	Sort            looseInt                       `json:"sort" yao:"lenient"`
	Mtime           any                            `json:"mtime"`
	Ctime           any                            `json:"ctime"`
	AuthMode        string                         `json:"auth_mode"`
	SupportedParams map[string]connector.ParamSpec `json:"supported_params"`
	Options         map[string]any                 `json:"options"`
	// Fields Yao ignores, seen in older apps.
	LANG    any `json:"LANG"`
	VERSION any `json:"VERSION"`
	Lang    any `json:"lang"`
}

// ignoredConnectorFields are top-level fields old Yao apps carry and Yao
// ignores.
var ignoredConnectorFields = []string{"LANG", "VERSION", "lang"}

// modelOptions are the options of Yao's openai and anthropic connectors
// (gou connector/{openai,anthropic}), plus agentbox's script (scripted
// only).
var modelOptions = []string{"capabilities", "extra_body", "host", "key", "max_tokens", "model", "protocols", "proxy", "temperature", "thinking", "version"}

// capabilityFlags are the boolean capabilities a connector declares (gou
// llm/capabilities.go); vision may also be a format string.
var capabilityFlags = []string{"audio", "embedding", "image_generation", "json", "multimodal", "reasoning", "streaming", "stt", "temperature_adjustable", "tool_calls", "vision"}

// loadConnectors loads every connector file under connectors/, by id; the
// second result lists the connectors skipped for not being chat models.
func (l *loader) loadConnectors() (map[string]*Connector, map[string]string) {
	files := l.specFiles(filepath.Join(l.root, ConnectorsDir), false)
	l.connIDs, l.brokenConns = map[string]bool{}, map[string]string{}
	l.connFiles = len(files)
	out := make(map[string]*Connector, len(files))
	skipped := map[string]string{}
	for _, f := range files {
		l.connIDs[f.id] = true
		c, skip := l.loadConnector(f.id, f.abs)
		switch {
		case c != nil:
			out[f.id] = c
		case skip != "":
			skipped[f.id] = skip
		default:
			l.brokenConns[f.id] = l.rel(f.abs)
		}
	}
	return out, skipped
}

// loadConnector checks one connector file. It returns the connector (nil
// when it has errors or is skipped) and, for a skipped non-model
// connector, its type.
func (l *loader) loadConnector(id, abs string) (*Connector, string) {
	var raw rawConnector
	d := l.decode(abs, &raw)
	if d == nil || d.broken {
		l.done(d)
		return nil, ""
	}
	for _, f := range ignoredConnectorFields {
		if d.has(f) {
			d.warnAt(d.keyOffset(f), "%s is ignored (by Yao too)", f)
		}
	}
	if what, ok := skippedTypes[raw.Type]; ok {
		d.warnPath("type", "%s connector skipped: %s, not a chat model; agentbox connects assistants to chat models only (openai, anthropic)", raw.Type, what)
		l.done(d)
		return nil, raw.Type
	}
	c := &Connector{ID: id, Type: raw.Type, Label: raw.Label, Name: raw.Name, Version: raw.Version,
		Description: raw.Description, Tags: raw.Tags, File: l.rel(abs)}
	switch {
	case d.bad["type"]:
	case raw.Type == "":
		d.errPath("type", "type is required (%s)", strings.Join(connectorTypes, ", "))
	case !oneOf(raw.Type, connectorTypes...):
		d.errPath("type", "unknown connector type %q (known: %s; skipped: %s)", raw.Type, strings.Join(connectorTypes, ", "), strings.Join(slices.Sorted(maps.Keys(skippedTypes)), ", "))
	}
	known := modelOptions
	if raw.Type == TypeScripted {
		known = []string{"model", "script"}
	}
	for _, k := range slices.Sorted(maps.Keys(raw.Options)) {
		if !slices.Contains(known, k) {
			hint := suggest(k, known)
			if k == "script" {
				hint = " (script is for scripted connectors)"
			} else if slices.Contains(connector.RequestFields(raw.Type), k) {
				hint = " (a request field: put it in extra_body, or in the assistant's options)"
			}
			d.errAt(d.keyOffset("options."+k), "unknown option %q%s", k, hint)
		}
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
	o := ConnectorOptions{Key: str("key"), Model: str("model"), Script: str("script"), APIVersion: str("version")}
	host, proxy := str("host"), str("proxy")
	switch {
	case host != "":
		o.Host, o.HostFrom = host, "host"
		if proxy != "" {
			d.warnPath("options.proxy", "options.proxy is not used: options.host is set (proxy is Yao's older name for host)")
		}
	case proxy != "":
		// Yao's older name for host: the endpoint, never an HTTP proxy.
		o.Host, o.HostFrom = proxy, "proxy"
	}
	if o.Host != "" {
		if _, isEnv := envRef(o.Host); !isEnv {
			if u, err := url.Parse(o.Host); err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
				d.errPath("options."+o.HostFrom, "options.%s: want an http(s) URL like \"https://api.openai.com\", got %q", o.HostFrom, o.Host)
			} else if u.User != nil || u.RawQuery != "" || u.Fragment != "" {
				d.errPath("options."+o.HostFrom, "options.%s: give only the base URL, without credentials, query or fragment", o.HostFrom)
			}
		}
	}
	if d.has("auth_mode") {
		if !oneOf(raw.AuthMode, connector.AuthModes...) {
			d.errPath("auth_mode", "auth_mode: unknown mode %q (known: %s)", raw.AuthMode, strings.Join(connector.AuthModes, ", "))
		}
		o.AuthMode = raw.AuthMode
	}
	if o.APIVersion != "" && raw.Type != TypeAnthropic {
		d.warnPath("options.version", "options.version is the anthropic-version header; an %s connector does not send it", raw.Type)
	}
	l.connectorFields(d, raw, &o)
	switch raw.Type {
	case TypeScripted:
		l.checkScripted(d, abs, &o)
	case TypeAnthropic, TypeOpenAI:
		if o.Model == "" && !d.bad["options.model"] {
			d.errPath("options", "options.model is required for an %s connector", raw.Type)
		}
		if raw.Type == TypeAnthropic && o.Key == "" && !d.bad["options.key"] && o.AuthMode == "" {
			d.errPath("options", "options.key is required for an anthropic connector (use \"$ENV.ANTHROPIC_API_KEY\")")
		}
	}
	c.Options = o
	if !l.done(d) {
		return nil, ""
	}
	return c, ""
}

// connectorFields checks the options that become request fields
// (temperature, max_tokens, thinking, extra_body) and the ones that never
// do (capabilities, protocols), and fills o.Extra with what the type's
// whitelist (or supported_params) lets through; a field it drops gets a
// warning, where Yao drops it silently.
func (l *loader) connectorFields(d *doc, raw rawConnector, o *ConnectorOptions) {
	opts := raw.Options
	if v, ok := opts["capabilities"]; ok && v != nil {
		caps, isObj := v.(map[string]any)
		if !isObj {
			d.errPath("options.capabilities", "options.capabilities: want an object, got %s", goKind(v))
		}
		for k, cv := range caps {
			p := "options.capabilities." + k
			switch {
			case k == "vision":
				if _, isBool := cv.(bool); !isBool {
					if _, isStr := cv.(string); !isStr {
						d.errPath(p, "%s: want true, false or a format name, got %s", p, goKind(cv))
					}
				}
			case k == "max_input_tokens" || k == "max_output_tokens":
				if _, isNum := cv.(float64); !isNum {
					d.errPath(p, "%s: want a number, got %s", p, goKind(cv))
				}
			case slices.Contains(capabilityFlags, k):
				if _, isBool := cv.(bool); !isBool {
					d.errPath(p, "%s: want true or false, got %s", p, goKind(cv))
				}
			default:
				d.errAt(d.keyOffset(p), "unknown capability %q%s", k, suggest(k, append(slices.Clone(capabilityFlags), "max_input_tokens", "max_output_tokens")))
			}
		}
		o.Capabilities = caps
	}
	if v, ok := opts["protocols"]; ok && v != nil {
		list, isList := v.([]any)
		if !isList {
			d.errPath("options.protocols", "options.protocols: want a list of strings, got %s", goKind(v))
		}
		for i, e := range list {
			s, isStr := e.(string)
			if !isStr {
				d.errPath(fmt.Sprintf("options.protocols[%d]", i), "options.protocols[%d]: want a string, got %s", i, goKind(e))
				continue
			}
			o.Protocols = append(o.Protocols, s)
		}
	}
	fields := map[string]any{}
	if v, ok := opts["temperature"]; ok && v != nil {
		if _, isNum := v.(float64); !isNum {
			d.errPath("options.temperature", "options.temperature: want a number, got %s", goKind(v))
		} else {
			fields["temperature"] = v
		}
	}
	if v, ok := opts["max_tokens"]; ok && v != nil {
		if f, isNum := v.(float64); !isNum || f != float64(int(f)) || f < 0 {
			d.errPath("options.max_tokens", "options.max_tokens: want a whole number, got %s", goKind(v))
		} else if f > 0 {
			fields["max_tokens"] = f // a JSON number, as the rest of Extra
		}
	}
	if v, ok := opts["thinking"]; ok && v != nil {
		fields["thinking"] = v
	}
	extraFrom := map[string]bool{}
	if v, ok := opts["extra_body"]; ok && v != nil {
		eb, isObj := v.(map[string]any)
		if !isObj {
			d.errPath("options.extra_body", "options.extra_body: want an object, got %s", goKind(v))
		}
		for k, ev := range eb {
			// Yao: extra_body never overrides a setting of the same name.
			if _, set := fields[k]; !set && !slices.Contains(modelOptions, k) {
				fields[k] = ev
				extraFrom[k] = true
			}
		}
	}
	if raw.SupportedParams != nil {
		o.Params = raw.SupportedParams
		for k, spec := range raw.SupportedParams {
			if spec.Min != nil && spec.Max != nil && *spec.Min > *spec.Max {
				d.errPath("supported_params."+k, "supported_params.%s: min %v is above max %v", k, *spec.Min, *spec.Max)
			}
		}
	}
	allowed := connector.RequestFields(raw.Type)
	for _, k := range slices.Sorted(maps.Keys(fields)) {
		where := "options." + k
		if extraFrom[k] {
			where = "options.extra_body." + k
		}
		switch {
		case o.Params != nil:
			if _, ok := o.Params[k]; !ok {
				d.warnAt(d.keyOffset(where), "%s is not sent: supported_params does not list it", where)
				delete(fields, k)
			}
		case raw.Type == TypeScripted:
		case !slices.Contains(allowed, k):
			d.warnAt(d.keyOffset(where), "%s is not sent: it is not a request field of %s connectors (%s)", where, raw.Type, strings.Join(allowed, ", "))
			delete(fields, k)
		}
	}
	if len(fields) > 0 {
		o.Extra = fields
	}
}

// checkScripted checks a scripted connector's script option.
func (l *loader) checkScripted(d *doc, abs string, o *ConnectorOptions) {
	if d.bad["options.script"] {
		return
	}
	if o.Script == "" {
		d.errPath("options", "options.script is required for a scripted connector: the path of a model script, relative to this file")
		return
	}
	if _, isEnv := envRef(o.Script); isEnv {
		d.errPath("options.script", "options.script cannot come from the environment")
		return
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
}

// scriptPos matches the "LINE:COL: msg" errors of scripted.ParseScript.
var scriptPos = regexp.MustCompile(`^(\d+):(\d+):\s*(.*)$`)

// checkScript validates a scripted connector's script (package scripted), so a broken
// demo script is found at load time like any other file.
func (l *loader) checkScript(abs string) {
	b, err := readConfig(abs)
	if err != nil {
		l.fileProblem(abs, "%v", unwrapPath(err))
		return
	}
	_, err = scripted.ParseScript(b, filepath.Ext(abs))
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

// connectorIDs lists the ids of defined connectors, sorted, for hints.
func (l *loader) connectorIDs() []string {
	ids := make([]string, 0, len(l.connIDs))
	for k := range l.connIDs {
		ids = append(ids, k)
	}
	sort.Strings(ids)
	return ids
}

// stringList is a list of strings that may be written as one string (Yao
// reads tags and modes that way); other scalars in the list become text.
type stringList []string

// UnmarshalJSON takes a string or a list of scalars.
func (s *stringList) UnmarshalJSON(b []byte) error {
	var one string
	if err := json.Unmarshal(b, &one); err == nil {
		*s = stringList{one}
		return nil
	}
	var list []any
	if err := json.Unmarshal(b, &list); err != nil {
		return fmt.Errorf("want a string or a list of strings, got %s", jsonKind(b))
	}
	out := make(stringList, 0, len(list))
	for _, e := range list {
		switch v := e.(type) {
		case string:
			out = append(out, v)
		case float64, bool:
			out = append(out, fmt.Sprint(v))
		default:
			return fmt.Errorf("want a list of strings, got an item that is %s", goKind(e))
		}
	}
	*s = out
	return nil
}

// looseInt is a number, or a string holding one, read as an integer (Yao
// reads sort with cast.ToInt).
type looseInt int

// UnmarshalJSON takes a number or a numeric string.
func (n *looseInt) UnmarshalJSON(b []byte) error {
	var f float64
	if err := json.Unmarshal(b, &f); err == nil {
		*n = looseInt(f)
		return nil
	}
	var s string
	if err := json.Unmarshal(b, &s); err == nil {
		if i, err := strconv.Atoi(strings.TrimSpace(s)); err == nil {
			*n = looseInt(i)
			return nil
		}
	}
	return fmt.Errorf("want a number, got %s", jsonKind(b))
}

// jsonKind names the kind of a JSON value for messages.
func jsonKind(b []byte) string {
	var v any
	if err := json.Unmarshal(b, &v); err != nil {
		return "invalid JSON"
	}
	return goKind(v)
}
