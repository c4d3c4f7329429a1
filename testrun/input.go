package testrun

import (
	"encoding/json"
	"errors"
	"fmt"
	"path/filepath"
	"slices"
	"strings"

	"github.com/agentbox/agentbox/chat"
)

// parsedInput is a case's input as the pipeline takes it.
type parsedInput struct {
	messages []chat.Message
	// files are the file parts of the last message (Yao's {"type":
	// "file"|"image"|"audio", "source": "file://path"}), uploaded into the
	// chat's workspace before the turn.
	files []attachment
}

// attachment is a local file a message carries.
type attachment struct {
	// Source is the path after file://, relative to the cases file.
	Source string
	// Name is the file's name in the workspace.
	Name string
	Kind string
}

// messageFields are the keys an input message may have.
var messageFields = []string{"role", "content", "name", "tool_call_id", "tool_calls", "refusal"}

// parseInput reads Yao's input forms: a string, one message, or a list of
// messages (the conversation so far, ending with the user's turn).
func parseInput(in any) (*parsedInput, error) {
	p := &parsedInput{}
	switch v := in.(type) {
	case string:
		if strings.TrimSpace(v) == "" {
			return nil, errors.New("the input text is empty")
		}
		p.messages = []chat.Message{{Role: chat.RoleUser, Content: v}}
	case map[string]any:
		m, files, err := parseMessage(v)
		if err != nil {
			return nil, err
		}
		p.messages, p.files = []chat.Message{m}, files
	case []any:
		if len(v) == 0 {
			return nil, errors.New("the conversation is empty")
		}
		for i, item := range v {
			o, ok := item.(map[string]any)
			if !ok {
				return nil, fmt.Errorf("[%d]: want a message {role, content}, got %s", i, describe(item))
			}
			m, files, err := parseMessage(o)
			if err != nil {
				return nil, fmt.Errorf("[%d]: %w", i, err)
			}
			if len(files) > 0 && i != len(v)-1 {
				return nil, fmt.Errorf("[%d]: files can be attached to the last message only", i)
			}
			p.messages, p.files = append(p.messages, m), files
		}
	default:
		return nil, fmt.Errorf("want a text, a message {role, content} or a list of messages, got %s", describe(in))
	}
	last := p.messages[len(p.messages)-1]
	if last.Role != chat.RoleUser && last.Role != chat.RoleTool {
		return nil, fmt.Errorf("the conversation ends with a %s message: the last one is the user's turn", last.Role)
	}
	return p, nil
}

func parseMessage(o map[string]any) (chat.Message, []attachment, error) {
	for k := range o {
		if !slices.Contains(messageFields, k) {
			return chat.Message{}, nil, unknownField("message", k, messageFields)
		}
	}
	m := chat.Message{Role: chat.RoleUser}
	if r, ok := o["role"]; ok {
		s, isStr := r.(string)
		switch {
		case !isStr:
			return m, nil, fmt.Errorf("role: want a string, got %s", describe(r))
		case s == chat.RoleUser, s == chat.RoleAssistant, s == chat.RoleSystem, s == chat.RoleTool:
			m.Role = s
		case s == "developer":
			m.Role = chat.RoleSystem
		default:
			return m, nil, fmt.Errorf("role %q: want user, assistant, system or tool", s)
		}
	}
	content, ok := o["content"]
	if !ok && o["tool_calls"] == nil {
		return m, nil, errors.New("missing \"content\"")
	}
	text, files, err := contentText(content)
	if err != nil {
		return m, nil, fmt.Errorf("content: %w", err)
	}
	m.Content = text
	if s, ok := o["name"].(string); ok {
		m.Name = s
	}
	if s, ok := o["tool_call_id"].(string); ok {
		m.ToolCallID = s
	}
	if tcs, ok := o["tool_calls"].([]any); ok {
		for i, tc := range tcs {
			call, err := parseToolCall(tc)
			if err != nil {
				return m, nil, fmt.Errorf("tool_calls[%d]: %w", i, err)
			}
			m.ToolCalls = append(m.ToolCalls, call)
		}
	}
	if len(files) > 0 && m.Role != chat.RoleUser {
		return m, nil, errors.New("only a user message can attach files")
	}
	return m, files, nil
}

// parseToolCall reads OpenAI's {id, type, function: {name, arguments}}
// (arguments as JSON text or an object).
func parseToolCall(v any) (chat.ToolCall, error) {
	o, ok := v.(map[string]any)
	if !ok {
		return chat.ToolCall{}, fmt.Errorf("want an object, got %s", describe(v))
	}
	id, _ := o["id"].(string)
	fn, _ := o["function"].(map[string]any)
	name, _ := fn["name"].(string)
	if name == "" {
		return chat.ToolCall{}, errors.New("function.name is missing")
	}
	call := chat.ToolCall{ID: id, Name: name, Input: chat.RawJSON("{}")}
	switch a := fn["arguments"].(type) {
	case string:
		call.Input = chat.ArgumentsInput(a)
	case nil:
	default:
		b, err := json.Marshal(a)
		if err != nil {
			return call, fmt.Errorf("function.arguments: %w", err)
		}
		call.Input = b
	}
	return call, nil
}

// contentText flattens content to text: a string, or parts of which text
// parts are joined by line breaks and file parts (file://) are collected
// as attachments. Parts that point to URLs or inline data are refused:
// agentbox's assistants take text, and files through the workspace.
func contentText(c any) (string, []attachment, error) {
	switch v := c.(type) {
	case nil:
		return "", nil, nil
	case string:
		return v, nil, nil
	case map[string]any:
		return contentText([]any{v})
	case []any:
		var texts []string
		var files []attachment
		for i, part := range v {
			o, ok := part.(map[string]any)
			if !ok {
				return "", nil, fmt.Errorf("[%d]: want a content part {type, ...}, got %s", i, describe(part))
			}
			typ, _ := o["type"].(string)
			switch typ {
			case "text":
				t, ok := o["text"].(string)
				if !ok {
					return "", nil, fmt.Errorf("[%d]: a text part needs \"text\"", i)
				}
				texts = append(texts, t)
			case "image", "file", "audio", "input_audio":
				src, _ := o["source"].(string)
				path, ok := strings.CutPrefix(src, "file://")
				if !ok || path == "" {
					return "", nil, fmt.Errorf("[%d]: a %s part needs \"source\": \"file://PATH\" (a file next to the cases); URLs and inline data are not supported", i, typ)
				}
				name, _ := o["name"].(string)
				if name == "" {
					name = filepath.Base(path)
				}
				files = append(files, attachment{Source: path, Name: name, Kind: typ})
			default:
				return "", nil, fmt.Errorf("[%d]: content part type %q is not supported (text, or image/file/audio with a file:// source)", i, typ)
			}
		}
		return strings.Join(texts, "\n"), files, nil
	}
	return "", nil, fmt.Errorf("want a text or a list of content parts, got %s", describe(c))
}

// describe names a JSON value's kind for messages.
func describe(v any) string {
	switch v.(type) {
	case nil:
		return "null"
	case string:
		return "a string"
	case float64, json.Number:
		return "a number"
	case bool:
		return "a boolean"
	case []any:
		return "a list"
	case map[string]any:
		return "an object"
	}
	return fmt.Sprintf("%T", v)
}

// summarize is a one-line preview of a case's input for progress lines.
func summarize(in any, n int) string {
	var s string
	switch v := in.(type) {
	case string:
		s = v
	case map[string]any:
		s, _, _ = contentText(v["content"])
	case []any:
		for i := len(v) - 1; i >= 0; i-- {
			if m, ok := v[i].(map[string]any); ok && (m["role"] == nil || m["role"] == "user") {
				s, _, _ = contentText(m["content"])
				break
			}
		}
		if s == "" {
			s = fmt.Sprintf("[%d messages]", len(v))
		}
	case nil:
		return ""
	default:
		b, _ := json.Marshal(v)
		s = string(b)
	}
	s = strings.Join(strings.Fields(s), " ")
	if r := []rune(s); len(r) > n {
		s = string(r[:n-1]) + "…"
	}
	return s
}
