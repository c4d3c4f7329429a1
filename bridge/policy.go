package bridge

import (
	"cmp"
	"encoding/json"
	"fmt"
	"net/http"
	"net/url"
	"path"
	"regexp"
	"slices"
	"sort"
	"strconv"
	"strings"

	"github.com/tidwall/gjson"
)

// What the model proxy lets a sandbox do with the real key: the routes the
// coding-agent CLIs use (Claude Code: the Messages API; Codex and opencode's
// openai provider: the Responses API; the Gemini CLI: generateContent) and
// nothing else of those APIs (files, batches, organization admin), each with
// what its requests may carry (allowlist.go), and model requests held to the
// assistant's model and token limit.

// route is one API route a sandbox may reach.
type route struct {
	method string
	path   string   // exact, or a prefix ending in "/" for one more segment
	query  []string // the query parameters it may carry
	// methods, for a prefix route, are the Gemini methods the segment
	// must end with (MODEL:METHOD); none: a plain model id.
	methods []string
	// api is the API the route belongs to: its headers, its errors' shape.
	api api
	// body is what the request body may hold (nil: the route takes none),
	// and maxBody its size in bytes.
	body    func(gjson.Result) *fieldError
	maxBody int64
	// usage reads the tokens of its answers (nil: not metered: token
	// counts, model listings).
	usage *usageReader
}

// Request body limits, each the provider's own: the Messages API's 32 MB,
// the Gemini API's 20 MB for inline data; the Responses API's 50 MB of
// images are held to the Messages API's limit (the CLIs send far less).
const (
	maxMessagesBody  = 32 << 20
	maxResponsesBody = 32 << 20
	maxGeminiBody    = 20 << 20
)

// routes are the routes the CLIs need (observed with Claude Code 2.1:
// messages with ?beta=true, token counting, model listings).
var routes = []route{
	{method: http.MethodPost, path: "/v1/messages", query: []string{"beta"}, api: apiAnthropic, body: checkMessages, maxBody: maxMessagesBody, usage: messagesUsage},
	{method: http.MethodPost, path: "/v1/messages/count_tokens", query: []string{"beta"}, api: apiAnthropic, body: checkCountTokens, maxBody: maxMessagesBody},
	{method: http.MethodGet, path: "/v1/models", query: []string{"beta", "limit", "after_id", "before_id"}, api: apiAnthropic},
	{method: http.MethodGet, path: "/v1/models/", query: []string{"beta"}, api: apiAnthropic},
	// Codex (wire_api "responses") and opencode's openai provider.
	{method: http.MethodPost, path: "/v1/responses", api: apiOpenAI, body: checkResponses, maxBody: maxResponsesBody, usage: responsesUsage},
	// The Gemini CLI (@google/genai): the agent loop streams, its helper
	// calls (routing, loop checks) and token counts do not.
	{method: http.MethodPost, path: "/v1beta/models/", query: []string{"alt"}, methods: []string{"generateContent", "streamGenerateContent"}, api: apiGemini, body: checkGemini, maxBody: maxGeminiBody, usage: geminiUsage},
	{method: http.MethodPost, path: "/v1beta/models/", query: []string{"alt"}, methods: []string{"countTokens"}, api: apiGemini, body: checkGeminiCount, maxBody: maxGeminiBody},
}

// GeminiRoute reports whether a (checked) path is a Gemini API call, which
// carries its key as x-goog-api-key and names its model in the path.
func GeminiRoute(p string) bool { return strings.HasPrefix(p, "/v1beta/models/") }

// modelID is what a model id in GET /v1/models/{id} may look like.
var modelID = regexp.MustCompile(`^[A-Za-z0-9][A-Za-z0-9._:@-]{0,127}$`)

// checkRoute normalises the request's path (percent-decoded, dot segments
// and repeated slashes resolved, as path.Clean does) and matches it, with
// the method and the query parameters, against routes. It returns the
// route and the path to forward: the normalised one, which is what was
// checked, so "/v1/messages/../files", "//v1/files" or "/v1%2Ffiles" can
// never reach another endpoint upstream than the one allowed.
func checkRoute(r *http.Request) (*route, string, *refusal) {
	p := r.URL.Path // already percent-decoded
	if strings.Contains(p, "\x00") || !strings.HasPrefix(p, "/") {
		return nil, "", &refusal{status: http.StatusBadRequest, typ: errInvalid, msg: "the path is not valid"}
	}
	clean := path.Clean(p)
	var match *route
	methods := []string{}
	for i := range routes {
		rt := &routes[i]
		ok := clean == rt.path
		if strings.HasSuffix(rt.path, "/") {
			rest, found := strings.CutPrefix(clean, rt.path)
			if len(rt.methods) > 0 {
				model, method, cut := strings.Cut(rest, ":")
				ok = found && cut && modelID.MatchString(model) && slices.Contains(rt.methods, method)
			} else {
				ok = found && modelID.MatchString(rest)
			}
		}
		if !ok {
			continue
		}
		methods = append(methods, rt.method)
		if rt.method == r.Method {
			match = rt
		}
	}
	switch {
	case len(methods) == 0:
		return nil, "", &refusal{status: http.StatusNotFound, typ: errNotFound, msg: clean + " is not available to sandboxes"}
	case match == nil:
		sort.Strings(methods)
		allow := strings.Join(slices.Compact(methods), ", ")
		return nil, "", &refusal{status: http.StatusMethodNotAllowed, typ: errInvalid,
			msg: fmt.Sprintf("%s %s is not available to sandboxes (allowed: %s)", r.Method, clean, allow), allow: allow}
	}
	q, err := url.ParseQuery(r.URL.RawQuery)
	if err != nil {
		return nil, "", &refusal{status: http.StatusBadRequest, typ: errInvalid, msg: "the query string is not valid: " + err.Error()}
	}
	for k := range q {
		if !slices.Contains(match.query, k) {
			return nil, "", &refusal{status: http.StatusBadRequest, typ: errInvalid,
				msg: fmt.Sprintf("query parameter %q is not available to sandboxes on %s", k, clean)}
		}
	}
	return match, clean, nil
}

// Limits hold a sandbox's model requests to what the turn decided: the
// assistant's model and token limit, the same bounds the HTTP API holds
// callers to.
type Limits struct {
	// Model is the model every messages request uses: a request naming
	// another one (the CLI's small fast model for side tasks, a model the
	// agent picked) is sent with this one instead. "" leaves the model. A
	// name ending in "[1m]" (Claude Code's for a model with its 1M-token
	// context) is the model without it, and allows the context-1m beta.
	Model string
	// MaxTokens caps max_tokens (0: no cap); a thinking budget is kept
	// under the cap, or thinking turned off when the cap leaves no room
	// for the API's smallest budget.
	MaxTokens int
	// Calls bounds the model calls of a turn (0: DefaultCalls): one more
	// is refused with a 429 the CLI does not retry.
	Calls int
	// Parallel bounds the model calls of a turn in flight at once (0:
	// DefaultParallel): more wait for one to end.
	Parallel int
}

// longContext is the suffix of a model name that asks for the 1M-token
// context (Claude Code's naming): the request names the model without it
// and sends the context-1m beta.
const longContext = "[1m]"

// model is the model requests name ("" leaves theirs).
func (l *Limits) model() string { return strings.TrimSuffix(l.Model, longContext) }

// longContext reports whether requests may ask for the 1M-token context
// (a beta that changes the price): when the turn's model does, or when no
// model is set (the CLI's own default, which is Claude Code's).
func (l *Limits) longContext() bool { return l.Model == "" || strings.HasSuffix(l.Model, longContext) }

func (l *Limits) calls() int { return cmp.Or(max(l.Calls, 0), DefaultCalls) }

func (l *Limits) parallel() int { return cmp.Or(max(l.Parallel, 0), DefaultParallel) }

// minThinkingBudget is the Messages API's smallest thinking budget.
const minThinkingBudget = 1024

// apply rewrites a messages request body to the limits. It replaces the
// values where they are (the rest of the body, often over 100 KB, is
// copied once, unparsed), every occurrence of a key (a body that repeats
// "model" cannot slip a second one past it), and returns what it changed,
// for the log. A body that is not a JSON object is left to the upstream to
// refuse.
func (l Limits) apply(body []byte) ([]byte, []string) {
	if l.Model == "" && l.MaxTokens <= 0 {
		return body, nil
	}
	type edit struct {
		at, n int
		with  string
	}
	var edits []edit
	var changed []string
	replace := func(v gjson.Result, with, what string) {
		if v.Index > 0 && v.Index+len(v.Raw) <= len(body) { // 0: gjson does not know where
			edits = append(edits, edit{v.Index, len(v.Raw), with})
			changed = append(changed, what)
		}
	}
	// The answer's token limit: the cap, or what the request asks below it.
	limit := l.MaxTokens
	var thinking []gjson.Result
	root := gjson.ParseBytes(body)
	if !root.IsObject() {
		return body, nil
	}
	root.ForEach(func(k, v gjson.Result) bool {
		switch k.String() {
		case "model":
			if model := l.model(); model != "" && (v.Type != gjson.String || v.String() != model) {
				replace(v, strconv.Quote(model), fmt.Sprintf("model %s -> %s", v.Raw, model))
			}
		case "max_tokens", "max_output_tokens": // Messages, Responses
			switch {
			case l.MaxTokens <= 0:
			case v.Type != gjson.Number || v.Float() > float64(l.MaxTokens):
				replace(v, strconv.Itoa(l.MaxTokens), fmt.Sprintf("%s %s -> %d", k.String(), v.Raw, l.MaxTokens))
			case v.Float() >= 1:
				limit = min(limit, int(v.Int()))
			}
		case "thinking":
			thinking = append(thinking, v)
		case "generationConfig": // Gemini
			if m := v.Get("maxOutputTokens"); l.MaxTokens > 0 && m.Exists() && (m.Type != gjson.Number || m.Float() > float64(l.MaxTokens)) {
				replace(m, strconv.Itoa(l.MaxTokens), fmt.Sprintf("generationConfig.maxOutputTokens %s -> %d", m.Raw, l.MaxTokens))
			}
		}
		return true
	})
	for _, v := range thinking {
		bt := v.Get("budget_tokens")
		if l.MaxTokens <= 0 || !bt.Exists() || (bt.Type == gjson.Number && bt.Float() < float64(limit)) {
			continue
		}
		// The whole thinking object is rewritten (decoded, so a repeated
		// key collapses to one).
		var t map[string]json.RawMessage
		if json.Unmarshal([]byte(v.Raw), &t) != nil {
			continue
		}
		what := "thinking off: max_tokens leaves no room for a budget"
		if limit-1 >= minThinkingBudget {
			t["budget_tokens"] = json.RawMessage(strconv.Itoa(limit - 1))
			what = fmt.Sprintf("thinking.budget_tokens %s -> %d", bt.Raw, limit-1)
		} else {
			t = map[string]json.RawMessage{"type": json.RawMessage(`"disabled"`)}
		}
		b, _ := json.Marshal(t)
		replace(v, string(b), what)
	}
	if len(edits) == 0 {
		return body, nil
	}
	sort.Slice(edits, func(i, j int) bool { return edits[i].at < edits[j].at })
	out := make([]byte, 0, len(body)+64)
	at := 0
	for _, e := range edits {
		if e.at < at {
			continue
		}
		out = append(append(out, body[at:e.at]...), e.with...)
		at = e.at + e.n
	}
	return append(out, body[at:]...), changed
}
