package assistant

import (
	"fmt"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"

	"gopkg.in/yaml.v3"
)

// DefaultLocale is the locale texts are translated to when a request
// names none.
const DefaultLocale = "en"

// loadLocales reads locales/*.yml: translations by lower-cased code, each
// flattened to dotted keys ("chat.prompts.0"); "en-us" also serves "en"
// and "us" unless those have files of their own (Yao agent/i18n).
func (l *loader) loadLocales(dir string) map[string]map[string]string {
	out := map[string]map[string]string{}
	l.walk(dir, func(p string) {
		ext := filepath.Ext(p)
		if ext != ".yml" && ext != ".yaml" {
			return
		}
		b, ok := l.read(p)
		if !ok {
			return
		}
		var v any
		if err := yaml.Unmarshal(b, &v); err != nil {
			l.probs = append(l.probs, yamlProblem(l.rel(p), err))
			return
		}
		flat := map[string]string{}
		flatten("", v, flat)
		out[strings.ToLower(strings.TrimSuffix(filepath.Base(p), ext))] = flat
	})
	for code, msgs := range out {
		lang, region, ok := strings.Cut(code, "-")
		if !ok {
			continue
		}
		for _, short := range []string{lang, region} {
			if _, own := out[short]; !own && short != "" {
				out[short] = msgs
			}
		}
	}
	return out
}

// flatten turns nested YAML into dotted keys.
func flatten(prefix string, v any, out map[string]string) {
	switch t := v.(type) {
	case map[string]any:
		for k, e := range t {
			flatten(join(prefix, k), e, out)
		}
	case []any:
		for i, e := range t {
			flatten(join(prefix, strconv.Itoa(i)), e, out)
		}
	case nil:
	default:
		if prefix != "" {
			out[prefix] = fmt.Sprint(t)
		}
	}
}

// template matches a {{key}} reference in a translatable text.
var template = regexp.MustCompile(`\{\{\s*([^}]+?)\s*\}\}`)

// Translate translates s for locale the way Yao does (agent/i18n): a text
// that is a key of the locale's messages becomes its message, and each
// {{key}} in it is replaced by the key's message. The locale is looked up
// as given (lower-cased), then by its region and language parts ("en-us":
// "us", then "en"); with no locale, DefaultLocale. A key no locale has
// stays as written.
func (a *Assistant) Translate(locale, s string) string {
	if len(a.Locales) == 0 || s == "" {
		return s
	}
	msgs := a.messages(locale)
	if msgs == nil {
		return s
	}
	trimmed := strings.TrimSpace(s)
	if !strings.Contains(trimmed, "{{") {
		if m, ok := msgs[trimmed]; ok {
			return m
		}
		return s
	}
	return template.ReplaceAllStringFunc(s, func(ref string) string {
		key := template.FindStringSubmatch(ref)[1]
		if m, ok := msgs[key]; ok {
			return m
		}
		return ref
	})
}

// messages returns the translations for locale, nil when there are none.
func (a *Assistant) messages(locale string) map[string]string {
	locale = strings.ToLower(strings.TrimSpace(locale))
	if locale == "" {
		locale = DefaultLocale
	}
	if m, ok := a.Locales[locale]; ok {
		return m
	}
	if lang, region, ok := strings.Cut(locale, "-"); ok {
		if m, ok := a.Locales[region]; ok {
			return m
		}
		if m, ok := a.Locales[lang]; ok {
			return m
		}
	}
	return nil
}

// Localized returns the assistant's name, description and placeholder
// translated for locale (see Translate).
func (a *Assistant) Localized(locale string) (name, description string, placeholder *Placeholder) {
	name, description = a.Translate(locale, a.Name), a.Translate(locale, a.Description)
	if p := a.Meta.Placeholder; p != nil {
		placeholder = &Placeholder{Title: a.Translate(locale, p.Title), Description: a.Translate(locale, p.Description)}
		for _, s := range p.Prompts {
			placeholder.Prompts = append(placeholder.Prompts, a.Translate(locale, s))
		}
	}
	return name, description, placeholder
}
