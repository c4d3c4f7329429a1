package pipeline

import (
	"fmt"
	"os"
	"regexp"
	"strconv"
	"time"

	"github.com/agentbox/agentbox/assistant"
	"github.com/agentbox/agentbox/chat"
)

// Metadata keys a request may set to choose prompts, as in Yao.
const (
	metaPromptPreset   = "__prompt_preset"
	metaDisableGlobals = "__disable_global_prompts"
)

// prompts returns the turn's prompts: agent/prompts.yml's global prompts
// unless disabled, then the assistant's prompts or the chosen preset,
// their variables expanded (Yao agent/assistant/build.go). A preset comes
// from the Create hook's prompt_preset, else the request's metadata
// __prompt_preset; an unknown key keeps the assistant's prompts.
func (t *turn) prompts(app *assistant.App, a *assistant.Assistant, o chat.Options) []chat.Message {
	disable := a.DisableGlobalPrompts
	if v, ok := t.meta[metaDisableGlobals].(bool); ok {
		disable = v
	}
	if o.DisableGlobalPrompts != nil {
		disable = *o.DisableGlobalPrompts
	}
	key := o.PromptPreset
	if key == "" {
		key, _ = t.meta[metaPromptPreset].(string)
	}
	own := a.Prompts
	if p, ok := a.PromptPresets[key]; ok && key != "" && len(p) > 0 {
		own = p
	}
	var out []chat.Message
	if !disable && app.Agent != nil {
		out = append(out, app.Agent.GlobalPrompts...)
	}
	out = append(out, own...)
	if len(out) == 0 {
		return nil
	}
	vars := t.ctxVars(a, o)
	now := time.Now()
	expanded := make([]chat.Message, len(out))
	for i, m := range out {
		m.Content = expandVars(m.Content, vars, now)
		expanded[i] = m
	}
	return expanded
}

// ctxVars are the $CTX variables of the turn's prompts: the assistant's,
// the request's and every metadata key (Yao's buildContextVariables).
func (t *turn) ctxVars(a *assistant.Assistant, o chat.Options) map[string]string {
	locale := cmpOr(o.Locale, t.req.Locale)
	name, description, _ := a.Localized(locale)
	vars := map[string]string{
		"ASSISTANT_ID":          a.ID,
		"ASSISTANT_NAME":        name,
		"ASSISTANT_DESCRIPTION": description,
		"ASSISTANT_TYPE":        a.Meta.Type,
		"CHAT_ID":               t.req.ChatID,
		"USER_ID":               t.req.UserID,
		"LOCALE":                locale,
		"THEME":                 o.Theme,
		"ROUTE":                 o.Route,
	}
	for k, v := range t.meta {
		if v == nil {
			continue
		}
		if s := fmt.Sprint(v); s != "" {
			vars[k] = s
		}
	}
	return vars
}

func cmpOr(a, b string) string {
	if a != "" {
		return a
	}
	return b
}

var (
	sysVar = regexp.MustCompile(`\$SYS\.([A-Z_]+)`)
	envVar = regexp.MustCompile(`\$ENV\.([A-Za-z_][A-Za-z0-9_]*)`)
	ctxVar = regexp.MustCompile(`\$CTX\.([A-Za-z_][A-Za-z0-9_]*)`)
)

// sysVars are Yao's $SYS variables. UNIX gives the Unix time (Yao prints
// a constant there by mistake).
var sysVars = map[string]func(time.Time) string{
	"TIME":     func(t time.Time) string { return t.Format("15:04:05") },
	"DATE":     func(t time.Time) string { return t.Format("2006-01-02") },
	"DATETIME": func(t time.Time) string { return t.Format("2006-01-02 15:04:05") },
	"TIMEZONE": func(t time.Time) string { return t.Location().String() },
	"WEEKDAY":  func(t time.Time) string { return t.Weekday().String() },
	"YEAR":     func(t time.Time) string { return t.Format("2006") },
	"MONTH":    func(t time.Time) string { return t.Format("01") },
	"DAY":      func(t time.Time) string { return t.Format("02") },
	"HOUR":     func(t time.Time) string { return t.Format("15") },
	"MINUTE":   func(t time.Time) string { return t.Format("04") },
	"SECOND":   func(t time.Time) string { return t.Format("05") },
	"UNIX":     func(t time.Time) string { return strconv.FormatInt(t.Unix(), 10) },
}

// expandVars replaces $SYS.*, $ENV.* and $CTX.* in a prompt's content the
// way Yao does: an unknown $SYS variable stays as written; an unset $ENV
// variable and an unknown $CTX key become empty.
func expandVars(s string, ctx map[string]string, now time.Time) string {
	s = sysVar.ReplaceAllStringFunc(s, func(m string) string {
		if f, ok := sysVars[m[len("$SYS."):]]; ok {
			return f(now)
		}
		return m
	})
	s = envVar.ReplaceAllStringFunc(s, func(m string) string { return os.Getenv(m[len("$ENV."):]) })
	return ctxVar.ReplaceAllStringFunc(s, func(m string) string { return ctx[m[len("$CTX."):]] })
}
