package server

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"strings"

	"github.com/agentbox/agentbox/chat"
	"github.com/agentbox/agentbox/vision"
)

// The input of a Responses API request, as chat messages.

// inputItem is one item of input, any type.
type inputItem struct {
	Type    string          `json:"type"`
	ID      string          `json:"id"`
	Role    string          `json:"role"`
	Content json.RawMessage `json:"content"`
	// function_call and function_call_output
	CallID    string          `json:"call_id"`
	Name      string          `json:"name"`
	Arguments string          `json:"arguments"`
	Output    json.RawMessage `json:"output"`
}

// inputs resolves the request's input into chat messages, after the
// instructions. refs collects the stored responses its items come from
// (item_reference, or items with the ids of a stored response's output).
type inputs struct {
	s    *Server
	ctx  context.Context
	user string
	msgs []chat.Message
	refs []string
}

func (s *Server) inputMessages(ctx context.Context, user string, in *responsesRequest) ([]chat.Message, []string, error) {
	x := &inputs{s: s, ctx: ctx, user: user}
	if in.Instructions != nil && *in.Instructions != "" {
		x.msgs = append(x.msgs, chat.Message{Role: chat.RoleSystem, Content: *in.Instructions})
	}
	raw := bytes.TrimSpace(in.Input)
	switch {
	case len(raw) == 0 || string(raw) == "null":
		return nil, nil, fieldErr("input", "missing: send a string or a list of input items")
	case raw[0] == '"':
		var text string
		_ = json.Unmarshal(raw, &text)
		if text == "" {
			return nil, nil, fieldErr("input", "empty: send some text")
		}
		x.msgs = append(x.msgs, chat.Message{Role: chat.RoleUser, Content: text})
		return x.msgs, nil, nil
	case raw[0] != '[':
		return nil, nil, fieldErr("input", "want a string or a list of input items")
	}
	var items []json.RawMessage
	if err := json.Unmarshal(raw, &items); err != nil {
		return nil, nil, fieldErr("input", "want a string or a list of input items: %v", err)
	}
	if len(items) == 0 {
		return nil, nil, fieldErr("input", "empty: send at least one item")
	}
	for i, it := range items {
		if err := x.add(fmt.Sprintf("input[%d]", i), it, 0); err != nil {
			return nil, nil, err
		}
	}
	return x.msgs, x.refs, nil
}

// add appends one input item; depth bounds item_reference chains.
func (x *inputs) add(where string, raw json.RawMessage, depth int) error {
	var it inputItem
	if err := json.Unmarshal(raw, &it); err != nil {
		return fieldErr(where, "want an input item object")
	}
	typ := it.Type
	if typ == "" && it.Role != "" {
		typ = "message"
	}
	if it.ID != "" && typ != "item_reference" {
		if resp := responseOfItem(it.ID); resp != "" && !slices.Contains(x.refs, resp) {
			if _, found, _ := x.s.responses.Response(x.ctx, x.user, resp); found {
				x.refs = append(x.refs, resp)
			}
		}
	}
	switch typ {
	case "message":
		return x.message(where, it)
	case "function_call":
		if it.CallID == "" || it.Name == "" {
			return fieldErr(where, "a function_call item needs call_id and name")
		}
		tc := chat.ToolCall{ID: it.CallID, Name: it.Name, Input: chat.ArgumentsInput(it.Arguments)}
		if n := len(x.msgs); n > 0 && x.msgs[n-1].Role == chat.RoleAssistant {
			x.msgs[n-1].ToolCalls = append(x.msgs[n-1].ToolCalls, tc)
		} else {
			x.msgs = append(x.msgs, chat.Message{Role: chat.RoleAssistant, ToolCalls: []chat.ToolCall{tc}})
		}
		return nil
	case "function_call_output":
		if it.CallID == "" {
			return fieldErr(where+".call_id", "missing: a function_call_output answers the function_call with this call_id")
		}
		text, err := itemText(where+".output", it.Output)
		if err != nil {
			return err
		}
		x.msgs = append(x.msgs, chat.Message{Role: chat.RoleTool, ToolCallID: it.CallID, Content: text})
		return nil
	case "reasoning", "mcp_call", "mcp_list_tools":
		// Thinking is not sent back to models, and an agent's own tool
		// activity lives in its session in the chat's workspace.
		return nil
	case "item_reference":
		if depth > 0 || it.ID == "" {
			return fieldErr(where+".id", "an item_reference needs the id of an item of a stored response")
		}
		item, err := x.storedItem(it.ID)
		if err != nil {
			return fieldErr(where+".id", "%v", err)
		}
		return x.add(where, item, depth+1)
	case "":
		return fieldErr(where+".type", "missing")
	}
	return fieldErr(where+".type", "%q is not supported: agentbox takes message, function_call, function_call_output and item_reference items", typ)
}

func (x *inputs) message(where string, it inputItem) error {
	role := it.Role
	switch role {
	case chat.RoleUser, chat.RoleAssistant, chat.RoleSystem, chat.RoleDeveloper:
	case "":
		return fieldErr(where+".role", "missing: use user, assistant, system or developer")
	default:
		return fieldErr(where+".role", "%q is not supported: use user, assistant, system or developer", it.Role)
	}
	text, parts, err := itemContent(where+".content", it.Content, role == chat.RoleUser)
	if err != nil {
		return err
	}
	if role == chat.RoleUser && text == "" && len(parts) == 0 {
		return fieldErr(where+".content", "empty: a user message needs text or an image")
	}
	x.msgs = append(x.msgs, chat.Message{Role: role, Content: text, Parts: parts})
	return nil
}

// itemText flattens content (a string, or a list of input_text,
// output_text, text and refusal parts) into text.
func itemText(where string, raw json.RawMessage) (string, error) {
	text, _, err := itemContent(where, raw, false)
	return text, err
}

// itemContent reads content (a string, or a list of input_text,
// output_text, text and refusal parts, and with images input_image
// parts): its text, joined, and its parts when it has images (nil for
// text only).
func itemContent(where string, raw json.RawMessage, images bool) (string, []chat.Part, error) {
	raw = bytes.TrimSpace(raw)
	if len(raw) == 0 || string(raw) == "null" {
		return "", nil, nil
	}
	if raw[0] == '"' {
		var s string
		if err := json.Unmarshal(raw, &s); err != nil {
			return "", nil, fieldErr(where, "%v", err)
		}
		return s, nil, nil
	}
	var parts []struct {
		Type     string  `json:"type"`
		Text     *string `json:"text"`
		Refusal  *string `json:"refusal"`
		ImageURL *string `json:"image_url"`
		FileID   *string `json:"file_id"`
		Detail   string  `json:"detail"`
	}
	if err := json.Unmarshal(raw, &parts); err != nil {
		return "", nil, fieldErr(where, "want a string or a list of content parts")
	}
	var texts []string
	var out []chat.Part
	n := 0
	for j, p := range parts {
		pw := fmt.Sprintf("%s[%d]", where, j)
		switch {
		case (p.Type == "input_text" || p.Type == "output_text" || p.Type == "text") && p.Text != nil:
			texts = append(texts, *p.Text)
			out = append(out, chat.Part{Type: chat.PartText, Text: *p.Text})
		case p.Type == "refusal" && p.Refusal != nil:
			texts = append(texts, *p.Refusal)
			out = append(out, chat.Part{Type: chat.PartText, Text: *p.Refusal})
		case p.Type == "input_image" && images:
			if p.FileID != nil {
				return "", nil, fieldErr(pw+".file_id", "not supported: send the image as image_url (a data: URL or an http(s) address)")
			}
			if p.ImageURL == nil {
				return "", nil, fieldErr(pw+".image_url", "missing: a data: URL or an http(s) address")
			}
			img, err := imagePart(pw+".image_url", pw+".detail", *p.ImageURL, p.Detail)
			if err != nil {
				return "", nil, err
			}
			if n++; n > vision.MaxPerMessage {
				return "", nil, fieldErr(pw, "more than %d images in one message", vision.MaxPerMessage)
			}
			out = append(out, img)
		case p.Type == "input_image":
			return "", nil, fieldErr(pw+".type", "images go in user messages only")
		default:
			return "", nil, fieldErr(pw+".type", "%q is not supported: only text and input_image parts are", p.Type)
		}
	}
	if n == 0 {
		out = nil
	}
	return strings.Join(texts, ""), out, nil
}

// storedItem finds an output item of one of the user's stored responses
// by its id.
func (x *inputs) storedItem(id string) (json.RawMessage, error) {
	resp := responseOfItem(id)
	if resp == "" {
		return nil, fmt.Errorf("%q is not the id of an item agentbox returned", id)
	}
	r, found, err := x.s.responses.Response(x.ctx, x.user, resp)
	if err != nil {
		return nil, fmt.Errorf("stored responses unavailable: %w", err)
	}
	if !found {
		return nil, fmt.Errorf("no stored response holds item %q (it was created with store: false, or is not yours)", id)
	}
	var body struct {
		Output []json.RawMessage `json:"output"`
	}
	if err := json.Unmarshal(r.Body, &body); err != nil {
		return nil, fmt.Errorf("stored response %s: %w", resp, err)
	}
	for _, o := range body.Output {
		var head struct {
			ID string `json:"id"`
		}
		if json.Unmarshal(o, &head) == nil && head.ID == id {
			if !slices.Contains(x.refs, resp) {
				x.refs = append(x.refs, resp)
			}
			return o, nil
		}
	}
	return nil, fmt.Errorf("stored response %s has no item %q", resp, id)
}
