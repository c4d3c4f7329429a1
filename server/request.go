package server

import (
	"bytes"
	"encoding/json"
	"fmt"
	"net"
	"net/http"
	"slices"
	"strings"

	"github.com/agentbox/agentbox/chat"
	"github.com/agentbox/agentbox/jsapi"
	"github.com/agentbox/agentbox/vision"
)

// wireMessage is a message as clients send it: content is a string, null,
// or an array of content parts; an assistant message may carry tool calls,
// a tool message answers one.
type wireMessage struct {
	Role         string          `json:"role"`
	Content      json.RawMessage `json:"content"`
	Name         string          `json:"name,omitempty"`
	ToolCallID   string          `json:"tool_call_id,omitempty"`
	ToolCalls    []wireToolCall  `json:"tool_calls,omitempty"`
	FunctionCall json.RawMessage `json:"function_call,omitempty"`
}

// wireToolCall is a function call in OpenAI's shape (Index only in
// streamed deltas).
type wireToolCall struct {
	Index    *int         `json:"index,omitempty"`
	ID       string       `json:"id"`
	Type     string       `json:"type"`
	Function wireFunction `json:"function"`
}

type wireFunction struct {
	Name string `json:"name"`
	// Arguments is JSON text.
	Arguments string `json:"arguments"`
}

// contentPart is one element of an array content: text, or an image
// (OpenAI's image_url: an object with url and detail, or the URL alone).
type contentPart struct {
	Type     string          `json:"type"`
	Text     *string         `json:"text"`
	ImageURL json.RawMessage `json:"image_url"`
}

// toMessages converts wire messages (field is the JSON name for errors).
func toMessages(field string, in []wireMessage) ([]chat.Message, error) {
	if len(in) == 0 {
		return nil, fieldErr(field, "missing or empty: send at least one message")
	}
	out := make([]chat.Message, 0, len(in))
	for i, m := range in {
		msg, err := toMessage(fmt.Sprintf("%s[%d]", field, i), m)
		if err != nil {
			return nil, err
		}
		out = append(out, msg)
	}
	return out, nil
}

func toMessage(where string, m wireMessage) (chat.Message, error) {
	role := m.Role
	switch role {
	// developer: newer OpenAI clients send system prompts so; it goes on
	// as it is (a provider without it takes it as system).
	case chat.RoleSystem, chat.RoleDeveloper, chat.RoleUser, chat.RoleAssistant, chat.RoleTool:
	case "":
		return chat.Message{}, fieldErr(where+".role", "missing: use system, developer, user, assistant or tool")
	default:
		return chat.Message{}, fieldErr(where+".role", "%q is not supported: use system, developer, user, assistant or tool", m.Role)
	}
	text, parts, err := content(where+".content", m.Content)
	if err != nil {
		return chat.Message{}, err
	}
	if text == "" && len(parts) == 0 && role == chat.RoleUser {
		return chat.Message{}, fieldErr(where+".content", "empty: a user message needs text or an image")
	}
	if len(parts) > 0 && role != chat.RoleUser {
		return chat.Message{}, fieldErr(where+".content", "images go in user messages only")
	}
	if len(m.FunctionCall) > 0 && string(m.FunctionCall) != "null" {
		return chat.Message{}, fieldErr(where+".function_call", "not supported: send tool_calls")
	}
	msg := chat.Message{Role: role, Content: text, Parts: parts, Name: m.Name}
	switch {
	case role == chat.RoleTool:
		if m.ToolCallID == "" {
			return chat.Message{}, fieldErr(where+".tool_call_id", "missing: a tool message answers the tool call with this id")
		}
		msg.ToolCallID = m.ToolCallID
	case len(m.ToolCalls) > 0 && role != chat.RoleAssistant:
		return chat.Message{}, fieldErr(where+".tool_calls", "only assistant messages carry tool calls")
	}
	for j, tc := range m.ToolCalls {
		p := fmt.Sprintf("%s.tool_calls[%d]", where, j)
		switch {
		case tc.Type != "" && tc.Type != "function":
			return chat.Message{}, fieldErr(p+".type", "%q is not supported: only function tool calls are", tc.Type)
		case tc.ID == "":
			return chat.Message{}, fieldErr(p+".id", "missing")
		case tc.Function.Name == "":
			return chat.Message{}, fieldErr(p+".function.name", "missing")
		}
		msg.ToolCalls = append(msg.ToolCalls, chat.ToolCall{ID: tc.ID, Name: tc.Function.Name, Input: chat.ArgumentsInput(tc.Function.Arguments)})
	}
	return msg, nil
}

// content reads a message's content (a string, null, or an array of text
// and image_url parts): its text, and its parts when it has images (nil
// for text only). Parts of any other type (audio, files) are refused.
func content(where string, raw json.RawMessage) (string, []chat.Part, error) {
	raw = bytes.TrimSpace(raw)
	if len(raw) == 0 || string(raw) == "null" {
		return "", nil, nil
	}
	switch raw[0] {
	case '"':
		var s string
		if err := json.Unmarshal(raw, &s); err != nil {
			return "", nil, badRequest("%s: %v", where, err)
		}
		return s, nil, nil
	case '[':
		var raws []json.RawMessage
		if err := json.Unmarshal(raw, &raws); err != nil {
			return "", nil, badRequest("%s: %v", where, err)
		}
		parts := make([]chat.Part, 0, len(raws))
		images := 0
		for j, pr := range raws {
			pw := fmt.Sprintf("%s[%d]", where, j)
			var p contentPart
			if err := json.Unmarshal(pr, &p); err != nil {
				return "", nil, badRequest("%s must be an object like {\"type\": \"text\", \"text\": \"...\"}", pw)
			}
			switch p.Type {
			case chat.PartText:
				if p.Text == nil {
					return "", nil, badRequest("%s.text is missing", pw)
				}
				parts = append(parts, chat.Part{Type: chat.PartText, Text: *p.Text})
			case chat.PartImage:
				var im chat.ImageURL
				if err := json.Unmarshal(p.ImageURL, &im.URL); err != nil {
					if err := json.Unmarshal(p.ImageURL, &im); err != nil || len(p.ImageURL) == 0 {
						return "", nil, fieldErr(pw+".image_url", `want {"url": "data:image/png;base64,..."} or {"url": "https://..."}`)
					}
				}
				img, err := imagePart(pw+".image_url.url", pw+".image_url.detail", im.URL, im.Detail)
				if err != nil {
					return "", nil, err
				}
				if images++; images > vision.MaxPerMessage {
					return "", nil, fieldErr(pw, "more than %d images in one message", vision.MaxPerMessage)
				}
				parts = append(parts, img)
			default:
				return "", nil, badRequest("%s: content part type %q is not supported: only text and image_url parts are", pw, p.Type)
			}
		}
		if images == 0 {
			return chat.TextOf(parts), nil, nil
		}
		return chat.TextOf(parts), parts, nil
	}
	return "", nil, badRequest("%s must be a string or an array of content parts", where)
}

// imagePart checks an image's address: a data: URL of an image (decoded
// here, its media type as its bytes say) or an http(s) address, fetched
// when the turn runs from a host app.jsonc's images.allowed_hosts allows.
func imagePart(urlField, detailField, url, detail string) (chat.Part, error) {
	switch detail {
	case "", "auto", "low", "high":
	default:
		return chat.Part{}, fieldErr(detailField, "%q is not one of auto, low, high", detail)
	}
	switch {
	case strings.HasPrefix(url, "data:"):
		im, err := vision.Parse(url)
		if err != nil {
			return chat.Part{}, fieldErr(urlField, "%v", err)
		}
		url = im.DataURL()
	case strings.HasPrefix(url, "https://"), strings.HasPrefix(url, "http://"):
		if len(url) > 8192 {
			return chat.Part{}, fieldErr(urlField, "an address of %d bytes, at most 8192", len(url))
		}
	case url == "":
		return chat.Part{}, fieldErr(urlField, "missing: a data: URL or an http(s) address")
	default:
		return chat.Part{}, fieldErr(urlField, "want a data: URL (data:image/png;base64,...) or an http(s) address")
	}
	return chat.Part{Type: chat.PartImage, ImageURL: &chat.ImageURL{URL: url, Detail: detail}}, nil
}

// chatID returns the chat id from the X-Chat-ID header or the body's
// chat_id (they must agree when both are given), or a new id when neither
// is. generated reports the latter.
func chatID(r *http.Request, body string) (id string, generated bool, err error) {
	hdr := strings.TrimSpace(r.Header.Get("X-Chat-ID"))
	switch {
	case hdr != "" && body != "" && hdr != body:
		return "", false, badRequest("X-Chat-ID header %q and chat_id %q differ: send one of them", hdr, body)
	case hdr != "":
		id = hdr
	case body != "":
		id = body
	default:
		return newID("chat-"), true, nil
	}
	if err := validateID("chat", id); err != nil {
		return "", false, badRequest("%v", err)
	}
	return id, false, nil
}

// clientOf is where r came from, as Yao's hooks see it, by Yao's rules
// (agent/context/openapi.go): the client's type from its User-Agent, its
// address (the connection's: proxies' headers are not trusted), and each
// of theme, referer, accept and route from the query, else its X-Yao-*
// header, else the request's metadata; a referer or accept Yao does not
// know is its default (api, standard).
func clientOf(r *http.Request, meta map[string]any) jsapi.Client {
	pick := func(name string) string {
		if v := r.URL.Query().Get(name); v != "" {
			return v
		}
		if v := r.Header.Get("X-Yao-" + strings.ToUpper(name[:1]) + name[1:]); v != "" {
			return v
		}
		v, _ := meta[name].(string)
		return v
	}
	ua := r.UserAgent()
	host, _, err := net.SplitHostPort(r.RemoteAddr)
	if err != nil {
		host = r.RemoteAddr
	}
	c := jsapi.Client{Type: clientType(ua), UserAgent: ua, IP: host,
		Theme: strings.ToLower(pick("theme")), Referer: pick("referer"), Accept: pick("accept"), Route: pick("route")}
	if !slices.Contains(yaoReferers, c.Referer) {
		c.Referer = "api"
	}
	if !slices.Contains(yaoAccepts, c.Accept) {
		c.Accept = "standard"
	}
	return c
}

// yaoReferers and yaoAccepts are the values Yao knows.
var (
	yaoReferers = []string{"api", "process", "mcp", "jssdk", "agent", "agent_fork", "tool", "hook", "schedule", "script", "internal"}
	yaoAccepts  = []string{"standard", "cui-web", "cui-native", "cui-desktop"}
)

// clientType classifies a User-Agent as Yao does.
func clientType(ua string) string {
	ua = strings.ToLower(ua)
	has := func(subs ...string) bool {
		return slices.ContainsFunc(subs, func(s string) bool { return strings.Contains(ua, s) })
	}
	switch {
	case ua == "":
		return "web"
	case has("agent"):
		return "agent"
	case has("jssdk"):
		return "jssdk"
	case has("android"):
		return "android"
	case has("iphone", "ipad", "ipod"):
		return "ios"
	case has("windows"):
		return "windows"
	case has("mac os x", "macintosh"):
		return "macos"
	case has("linux"):
		return "linux"
	}
	return "web"
}

// locale returns the body's locale, else the first Accept-Language tag.
func locale(r *http.Request, body string) string {
	if body != "" {
		return body
	}
	al := r.Header.Get("Accept-Language")
	tag, _, _ := strings.Cut(al, ",")
	tag, _, _ = strings.Cut(tag, ";")
	tag = strings.TrimSpace(tag)
	if tag == "*" || len(tag) > 35 {
		return ""
	}
	return tag
}
