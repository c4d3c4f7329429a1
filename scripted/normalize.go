package scripted

import (
	"encoding/json"
	"strings"
)

// This file reads the conversation of Responses and Gemini requests into
// the Anthropic shape Request.Messages returns, so a script's When works
// alike for every API.

// responsesMessages normalizes a Responses request's input: a string, or
// items (messages with input_text/output_text parts, function_call and
// custom_tool_call items, which become tool_use blocks of an assistant
// message, and their *_output items, which become "tool" messages like
// Chat Completions' tool messages). Developer messages count as "system".
func responsesMessages(body []byte) []Message {
	var b struct {
		Input json.RawMessage `json:"input"`
	}
	if json.Unmarshal(body, &b) != nil {
		return nil
	}
	var s string
	if json.Unmarshal(b.Input, &s) == nil {
		return []Message{{Role: "user", Content: []Block{{Type: "text", Text: s}}}}
	}
	var items []struct {
		Type      string          `json:"type"`
		Role      string          `json:"role"`
		Content   json.RawMessage `json:"content"`
		CallID    string          `json:"call_id"`
		Name      string          `json:"name"`
		Namespace string          `json:"namespace"`
		Arguments string          `json:"arguments"`
		Input     string          `json:"input"`
		Output    json.RawMessage `json:"output"`
	}
	if json.Unmarshal(b.Input, &items) != nil {
		return nil
	}
	var out []Message
	for _, it := range items {
		switch it.Type {
		case "message", "":
			role := it.Role
			if role == "developer" {
				role = "system"
			}
			msg := Message{Role: role}
			for _, t := range textOf(partsAsText(it.Content)) {
				msg.Content = append(msg.Content, Block{Type: "text", Text: t})
			}
			out = append(out, msg)
		case "function_call", "custom_tool_call":
			in := json.RawMessage(it.Arguments)
			if it.Type == "custom_tool_call" {
				in, _ = json.Marshal(map[string]string{"input": it.Input})
			}
			if !json.Valid(in) {
				in = nil
			}
			name := it.Name
			if it.Namespace != "" {
				name = it.Namespace + "__" + name
			}
			blk := Block{Type: "tool_use", ID: it.CallID, Name: name, Input: in}
			if n := len(out); n > 0 && out[n-1].Role == "assistant" && len(out[n-1].Content) > 0 && out[n-1].Content[0].Type == "tool_use" {
				out[n-1].Content = append(out[n-1].Content, blk)
			} else {
				out = append(out, Message{Role: "assistant", Content: []Block{blk}})
			}
		case "function_call_output", "custom_tool_call_output":
			out = append(out, Message{Role: "tool", Content: []Block{{Type: "tool_result", ToolUseID: it.CallID, Content: partsAsText(it.Output)}}})
		}
	}
	return out
}

// partsAsText turns Responses content parts (input_text, output_text,
// summary_text) into Anthropic text blocks; a string stays a string.
func partsAsText(raw json.RawMessage) json.RawMessage {
	var parts []map[string]any
	if json.Unmarshal(raw, &parts) != nil {
		return raw
	}
	blocks := make([]map[string]any, 0, len(parts))
	for _, p := range parts {
		if t, ok := p["text"].(string); ok {
			blocks = append(blocks, map[string]any{"type": "text", "text": t})
		}
	}
	b, _ := json.Marshal(blocks)
	return b
}

// geminiPart is one part of a Gemini content.
type geminiPart struct {
	Text         string `json:"text"`
	Thought      bool   `json:"thought"`
	FunctionCall *struct {
		ID   string          `json:"id"`
		Name string          `json:"name"`
		Args json.RawMessage `json:"args"`
	} `json:"functionCall"`
	FunctionResponse *struct {
		ID       string          `json:"id"`
		Name     string          `json:"name"`
		Response json.RawMessage `json:"response"`
	} `json:"functionResponse"`
}

// geminiMessages normalizes a Gemini request's contents: role "model" is
// the assistant, text parts (not thoughts) are text blocks, functionCall
// parts tool_use blocks and functionResponse parts tool_result blocks (with
// the function's name, since Gemini calls may have no id).
func geminiMessages(body []byte) []Message {
	var b struct {
		Contents []struct {
			Role  string       `json:"role"`
			Parts []geminiPart `json:"parts"`
		} `json:"contents"`
	}
	if json.Unmarshal(body, &b) != nil {
		return nil
	}
	out := make([]Message, 0, len(b.Contents))
	for _, c := range b.Contents {
		role := c.Role
		if role == "model" {
			role = "assistant"
		}
		msg := Message{Role: role}
		for _, p := range c.Parts {
			switch {
			case p.FunctionCall != nil:
				id := p.FunctionCall.ID
				if id == "" {
					id = p.FunctionCall.Name
				}
				msg.Content = append(msg.Content, Block{Type: "tool_use", ID: id, Name: p.FunctionCall.Name, Input: p.FunctionCall.Args})
			case p.FunctionResponse != nil:
				id := p.FunctionResponse.ID
				if id == "" {
					id = p.FunctionResponse.Name
				}
				msg.Content = append(msg.Content, Block{Type: "tool_result", ToolUseID: id, Name: p.FunctionResponse.Name,
					Content: geminiOutput(p.FunctionResponse.Response)})
			case p.Text != "" && !p.Thought:
				msg.Content = append(msg.Content, Block{Type: "text", Text: p.Text})
			}
		}
		out = append(out, msg)
	}
	return out
}

// geminiOutput is a function response's content as a JSON string: its
// "output" (or "error") member when it has one, else the whole response.
func geminiOutput(resp json.RawMessage) json.RawMessage {
	var m map[string]json.RawMessage
	if json.Unmarshal(resp, &m) == nil {
		for _, k := range []string{"output", "error"} {
			var s string
			if v, ok := m[k]; ok && json.Unmarshal(v, &s) == nil {
				b, _ := json.Marshal(s)
				return b
			}
		}
	}
	b, _ := json.Marshal(string(resp))
	return b
}

// geminiSystem is the text of a Gemini request's systemInstruction.
func geminiSystem(body []byte) []string {
	var b struct {
		System struct {
			Parts []geminiPart `json:"parts"`
		} `json:"systemInstruction"`
	}
	_ = json.Unmarshal(body, &b)
	var out []string
	for _, p := range b.System.Parts {
		if p.Text != "" {
			out = append(out, p.Text)
		}
	}
	return out
}

// geminiToolNames lists a Gemini request's function declarations.
func geminiToolNames(body []byte) []string {
	var b struct {
		Tools []struct {
			Decls []struct {
				Name string `json:"name"`
			} `json:"functionDeclarations"`
		} `json:"tools"`
	}
	_ = json.Unmarshal(body, &b)
	var out []string
	for _, t := range b.Tools {
		for _, d := range t.Decls {
			out = append(out, d.Name)
		}
	}
	return out
}

// geminiModel is the model a Gemini request names in its path.
func geminiModel(path string) string {
	m, _ := geminiMethod(path[strings.LastIndexByte(path, '/')+1:])
	return m
}
