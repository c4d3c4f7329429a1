package server

import (
	"bytes"
	"encoding/json"
	"fmt"
	"net/http"
	"strings"

	"github.com/agentbox/agentbox/chat"
)

// wireMessage is a message as clients send it: content is a string, null,
// or an array of content parts.
type wireMessage struct {
	Role       string          `json:"role"`
	Content    json.RawMessage `json:"content"`
	Name       string          `json:"name,omitempty"`
	ToolCallID string          `json:"tool_call_id,omitempty"`
}

// contentPart is one element of an array content.
type contentPart struct {
	Type string  `json:"type"`
	Text *string `json:"text"`
}

// toMessages converts wire messages (field is the JSON name for errors).
func toMessages(field string, in []wireMessage) ([]chat.Message, error) {
	if len(in) == 0 {
		return nil, badRequest("%s is missing or empty: send at least one message", field)
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
	case chat.RoleSystem, chat.RoleUser, chat.RoleAssistant, chat.RoleTool:
	case "developer": // newer OpenAI clients send system prompts as "developer"
		role = chat.RoleSystem
	case "":
		return chat.Message{}, badRequest("%s.role is missing: use system, user, assistant or tool", where)
	default:
		return chat.Message{}, badRequest("%s.role %q is not supported: use system, user, assistant or tool", where, m.Role)
	}
	text, err := flatten(where+".content", m.Content)
	if err != nil {
		return chat.Message{}, err
	}
	if text == "" && role == chat.RoleUser {
		return chat.Message{}, badRequest("%s.content is empty: a user message needs text", where)
	}
	return chat.Message{Role: role, Content: text, Name: m.Name, ToolCallID: m.ToolCallID}, nil
}

// flatten turns content (a string, null, or an array of text parts) into
// text. Parts of any other type (images, audio, files) are refused: the
// assistants here take text only.
func flatten(where string, raw json.RawMessage) (string, error) {
	raw = bytes.TrimSpace(raw)
	if len(raw) == 0 || string(raw) == "null" {
		return "", nil
	}
	switch raw[0] {
	case '"':
		var s string
		if err := json.Unmarshal(raw, &s); err != nil {
			return "", badRequest("%s: %v", where, err)
		}
		return s, nil
	case '[':
		var parts []json.RawMessage
		if err := json.Unmarshal(raw, &parts); err != nil {
			return "", badRequest("%s: %v", where, err)
		}
		texts := make([]string, 0, len(parts))
		for j, pr := range parts {
			var p contentPart
			if err := json.Unmarshal(pr, &p); err != nil {
				return "", badRequest("%s[%d] must be an object like {\"type\": \"text\", \"text\": \"...\"}", where, j)
			}
			switch {
			case p.Type != "text":
				return "", badRequest("%s[%d]: content part type %q is not supported: only text parts are", where, j, p.Type)
			case p.Text == nil:
				return "", badRequest("%s[%d].text is missing", where, j)
			}
			texts = append(texts, *p.Text)
		}
		return strings.Join(texts, "\n"), nil
	}
	return "", badRequest("%s must be a string or an array of text parts", where)
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
