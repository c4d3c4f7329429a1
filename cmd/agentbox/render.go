package main

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"sort"
	"strings"
	"sync"
	"unicode"
	"unicode/utf8"

	"github.com/agentbox/agentbox/chat"
	"github.com/agentbox/agentbox/internal/units"
	"github.com/agentbox/agentbox/pipeline"
)

// renderOptions configure a renderer.
type renderOptions struct {
	// JSON prints each event as one JSON line instead.
	JSON bool
	// Color uses ANSI styles (dim thinking, red errors, ...).
	Color bool
	// Width bounds tool lines (default 100).
	Width int
}

// renderer turns a chat event stream into terminal output: text as it
// streams, thinking dimmed, one line per tool call and result, notices and
// errors highlighted, and a usage summary at done. Event is safe to call
// from several goroutines; output order is the call order.
type renderer struct {
	w       io.Writer
	opts    renderOptions
	spinner *spinner

	mu       sync.Mutex
	tools    map[string]string // tool call id -> tool name
	calls    map[string]map[string]any
	printed  map[string]bool // tool calls already shown
	block    string          // the message id whose text is being written
	midLine  bool            // the last write did not end with a newline
	sawError bool
}

func newRenderer(w io.Writer, opts renderOptions) *renderer {
	if opts.Width <= 0 {
		opts.Width = 100
	}
	return &renderer{w: w, opts: opts, tools: map[string]string{}, calls: map[string]map[string]any{}, printed: map[string]bool{}}
}

// ANSI styles.
const (
	styleDim    = "\x1b[2m"
	styleRed    = "\x1b[31m"
	styleYellow = "\x1b[33m"
	styleCyan   = "\x1b[36m"
	styleBold   = "\x1b[1m"
	styleReset  = "\x1b[0m"
)

func (r *renderer) style(style, s string) string {
	if !r.opts.Color || s == "" {
		return s
	}
	return style + s + styleReset
}

func (r *renderer) dim(s string) string { return r.style(styleDim, s) }

// SawError reports whether an error message was rendered.
func (r *renderer) SawError() bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.sawError
}

// Finish ends a partial line.
func (r *renderer) Finish() {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.newline()
}

// Event renders one event. It has the chat.EmitFunc signature.
func (r *renderer) Event(e chat.Event) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.opts.JSON {
		b, err := chat.JSONLine(e)
		if err != nil {
			b, _ = json.Marshal(map[string]string{"event": "encode_error", "error": err.Error()})
			b = append(b, '\n')
		}
		r.w.Write(b)
		return
	}
	typ := e.Type
	if typ == chat.TypeLoading {
		r.loading(e)
		return
	}
	if r.spinner != nil && e.Event != chat.End {
		r.spinner.Stop()
	}
	switch e.Event {
	case chat.Start, chat.Delta, chat.Replace:
		r.content(e, typ)
	case chat.End:
		switch typ {
		case chat.TypeToolCall:
			r.toolCall(e)
		case chat.TypeText, chat.TypeThinking:
			if r.block == e.ID {
				r.newline()
				r.block = ""
			}
		}
	case chat.Done:
		r.done(e.Final)
	}
}

func (r *renderer) loading(e chat.Event) {
	msg := e.Text
	if m, ok := e.Props["message"].(string); ok && m != "" {
		msg = m
	}
	if r.spinner != nil {
		if e.Event == chat.End {
			r.spinner.Stop()
		} else if msg != "" {
			r.spinner.Start(trimEllipsis(msg))
		}
		return
	}
	if (e.Event == chat.Start || e.Event == chat.Replace) && msg != "" {
		r.line(r.dim("… " + trimEllipsis(msg)))
	}
}

// content renders text-bearing phases.
func (r *renderer) content(e chat.Event, typ string) {
	switch typ {
	case chat.TypeText, chat.TypeThinking:
		if e.Text == "" {
			return
		}
		if r.block != e.ID {
			r.newline()
			r.block = e.ID
			if typ == chat.TypeThinking && !r.opts.Color {
				r.write("thinking: ")
			}
		}
		if typ == chat.TypeThinking {
			r.write(r.dim(e.Text))
		} else {
			r.write(e.Text)
		}
	case chat.TypeToolCall:
		if e.Event != chat.Start {
			return // deltas carry partial input JSON; the end has it whole
		}
		r.calls[e.ID] = copyProps(e.Props)
		if id, ok := e.Props["id"].(string); ok {
			name, _ := e.Props["name"].(string)
			r.tools[id] = toolName(name)
		}
		if _, ok := e.Props["input"]; ok {
			r.toolCall(chat.Event{ID: e.ID})
		}
	case chat.TypeToolResult:
		if e.Event == chat.Start {
			r.toolResult(e)
		}
	case chat.TypeError:
		if e.Event == chat.Start {
			r.sawError = true
			code, _ := e.Props["code"].(string)
			msg := e.Text
			if m, ok := e.Props["message"].(string); ok && m != "" {
				msg = m
			}
			label := "error"
			if code != "" {
				label += " [" + code + "]"
			}
			r.line(r.style(styleRed+styleBold, label+":") + " " + r.style(styleRed, msg))
		}
	case chat.TypeNotice:
		if e.Event == chat.Start {
			msg := e.Text
			if m, ok := e.Props["message"].(string); ok && m != "" {
				msg = m
			}
			r.line(r.style(styleYellow, "! "+msg))
			if a, ok := e.Props["suggested_action"].(string); ok && a != "" {
				r.line(r.style(styleDim, "  suggested: "+a))
			}
		}
	case chat.TypeSession:
		if e.Event == chat.Start {
			var parts []string
			for _, k := range []string{"model", "session_id", "cwd"} {
				if v, ok := e.Props[k].(string); ok && v != "" {
					parts = append(parts, k+"="+v)
				}
			}
			if len(parts) > 0 {
				r.line(r.dim("session " + strings.Join(parts, " ")))
			}
		}
	case chat.TypeSkillProposed:
		if e.Event == chat.Start {
			name, _ := e.Props["name"].(string)
			id, _ := e.Props["proposal_id"].(string)
			msg := fmt.Sprintf("skill proposed: %s (%s), waiting for approval: agentbox skills show|approve|reject %s", name, id, id)
			if e.Props["test"] == true {
				msg += "; a test turn tries it after this turn"
			}
			r.line(r.style(styleCyan, "* "+msg))
		}
	case pipeline.TypePortOpened:
		// agentbox run gives it the port's preview URL.
		if e.Event == chat.Start {
			port := propPort(e.Props["port"])
			label, _ := e.Props["label"].(string)
			if u, ok := e.Props["url"].(string); ok {
				r.line(r.style(styleCyan, "↗ "+portName(port, label)+" is open: ") + u)
			} else {
				r.line(r.style(styleCyan, "↗ "+portName(port, label)+" is open"))
			}
		}
	default: // hook-defined types
		if e.Text != "" {
			if e.Event == chat.Start || r.block != e.ID {
				r.newline()
				r.block = e.ID
				r.write(r.style(styleCyan, "["+typ+"] "))
			}
			r.write(e.Text)
		}
	}
}

func copyProps(p map[string]any) map[string]any {
	out := make(map[string]any, len(p))
	for k, v := range p {
		out[k] = v
	}
	return out
}

// toolCall prints "→ Name  short input" when the call's input is known.
func (r *renderer) toolCall(e chat.Event) {
	if r.printed[e.ID] {
		return
	}
	r.printed[e.ID] = true
	props := r.calls[e.ID]
	if props == nil {
		props = map[string]any{}
	}
	for k, v := range e.Props {
		props[k] = v
	}
	delete(r.calls, e.ID)
	name, _ := props["name"].(string)
	if name == "" {
		name = "tool"
	}
	name = toolName(name)
	if id, ok := props["id"].(string); ok {
		r.tools[id] = name
	}
	line := r.style(styleCyan, "→ "+name)
	if in := shortInput(props["input"], r.opts.Width-len(name)-4); in != "" {
		line += "  " + in
	}
	r.line(line)
}

// toolResult prints "← Name  first line (size)", red when it failed.
func (r *renderer) toolResult(e chat.Event) {
	id, _ := e.Props["tool_call_id"].(string)
	name := r.tools[id]
	if name == "" {
		name = "result"
	}
	content := e.Text
	if c, ok := e.Props["content"]; ok {
		content = contentText(c)
	}
	isErr, _ := e.Props["is_error"].(bool)
	first, _, _ := strings.Cut(strings.TrimSpace(content), "\n")
	first = truncate(first, r.opts.Width-len(name)-16)
	size := units.FormatBytes(int64(len(content)))
	if n := strings.Count(strings.TrimRight(content, "\n"), "\n") + 1; content != "" && n > 1 {
		size = fmt.Sprintf("%d lines, %s", n, size)
	}
	arrow := "← " + name
	if isErr {
		r.line(r.style(styleRed, "✗ "+name+"  "+first) + " " + r.dim("("+size+")"))
		return
	}
	if first == "" {
		r.line(r.dim(arrow + "  (empty)"))
		return
	}
	r.line(r.dim(arrow) + "  " + first + " " + r.dim("("+size+")"))
}

// done prints the usage summary line.
func (r *renderer) done(f *chat.Final) {
	r.newline()
	if f == nil {
		return
	}
	var parts []string
	u := f.Usage
	if u.InputTokens+u.OutputTokens+u.CacheReadTokens > 0 {
		p := fmt.Sprintf("%d in / %d out tokens", u.InputTokens+u.CacheReadTokens+u.CacheCreationTokens, u.OutputTokens)
		if u.CacheReadTokens > 0 {
			p += fmt.Sprintf(" (%d cached)", u.CacheReadTokens)
		}
		parts = append(parts, p)
	}
	if u.CostUSD > 0 {
		parts = append(parts, fmt.Sprintf("$%.4f", u.CostUSD))
	}
	if u.Turns > 0 {
		parts = append(parts, plural(u.Turns, "turn"))
	}
	switch {
	case u.DurationMS >= 1000:
		parts = append(parts, fmt.Sprintf("%.1fs", float64(u.DurationMS)/1000))
	case u.DurationMS > 0:
		parts = append(parts, fmt.Sprintf("%dms", u.DurationMS))
	}
	summary := "— " + strings.Join(parts, " · ")
	if f.Error != "" {
		failed := r.style(styleRed, "— failed ("+f.Error+")")
		if len(parts) > 0 {
			failed += " " + r.dim(strings.Join(parts, " · "))
		}
		r.line(failed)
		return
	}
	if len(parts) > 0 {
		r.line(r.dim(summary))
	}
}

// line writes s on a line of its own.
func (r *renderer) line(s string) {
	r.newline()
	r.block = ""
	r.write(s + "\n")
}

func (r *renderer) newline() {
	if r.midLine {
		r.write("\n")
	}
}

func (r *renderer) write(s string) {
	if s == "" {
		return
	}
	io.WriteString(r.w, s)
	r.midLine = !strings.HasSuffix(s, "\n") && !strings.HasSuffix(s, "\n"+styleReset)
}

// shortInput renders a tool input compactly: the telling field of common
// tools (a command, a path, a pattern), else compact JSON, on one line.
func shortInput(in any, width int) string {
	if width < 20 {
		width = 20
	}
	var m map[string]any
	switch v := in.(type) {
	case nil:
		return ""
	case map[string]any:
		m = v
	case json.RawMessage:
		if err := json.Unmarshal(v, &m); err != nil {
			return truncate(oneLine(string(v)), width)
		}
	case string:
		if err := json.Unmarshal([]byte(v), &m); err != nil {
			return truncate(oneLine(v), width)
		}
	default:
		b, _ := json.Marshal(v)
		return truncate(oneLine(string(b)), width)
	}
	for _, k := range []string{"command", "file_path", "path", "pattern", "url", "query", "notebook_path", "prompt", "description"} {
		if s, ok := m[k].(string); ok && s != "" {
			return truncate(oneLine(s), width)
		}
	}
	if len(m) == 0 {
		return ""
	}
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	var buf bytes.Buffer
	for i, k := range keys {
		if i > 0 {
			buf.WriteString(" ")
		}
		b, _ := json.Marshal(m[k])
		fmt.Fprintf(&buf, "%s=%s", k, b)
	}
	return truncate(oneLine(buf.String()), width)
}

// contentText flattens a tool result's content (a string, or an array of
// {type, text} blocks).
func contentText(c any) string {
	switch v := c.(type) {
	case string:
		return v
	case []any:
		var parts []string
		for _, p := range v {
			if m, ok := p.(map[string]any); ok {
				if s, ok := m["text"].(string); ok {
					parts = append(parts, s)
				}
			}
		}
		return strings.Join(parts, "\n")
	case nil:
		return ""
	}
	b, _ := json.Marshal(c)
	return string(b)
}

// toolName shows an MCP tool "mcp__server__tool" as "server.tool".
func toolName(name string) string {
	if rest, ok := strings.CutPrefix(name, "mcp__"); ok {
		if srv, tool, ok := strings.Cut(rest, "__"); ok {
			return srv + "." + tool
		}
	}
	return name
}

// trimEllipsis drops a trailing "…" or "..." (the spinner adds its own).
func trimEllipsis(s string) string {
	return strings.TrimRight(strings.TrimSuffix(strings.TrimSpace(s), "…"), ".")
}

func oneLine(s string) string {
	return strings.Join(strings.Fields(s), " ")
}

// truncate shortens s to at most n runes, marking the cut with "…". It
// cuts after a whole word when one ends in the last third of the room,
// else (a long path, a word longer than that) where the room ends.
func truncate(s string, n int) string {
	if n < 2 {
		n = 2
	}
	if utf8.RuneCountInString(s) <= n {
		return s
	}
	r := []rune(s)[:n-1]
	for i := len(r) - 1; i >= len(r)*2/3; i-- {
		if unicode.IsSpace(r[i]) {
			return strings.TrimRightFunc(string(r[:i]), func(c rune) bool { return unicode.IsSpace(c) || unicode.IsPunct(c) }) + "…"
		}
	}
	return string(r) + "…"
}

// isTerminal reports whether w is a character device (a terminal).
func isTerminal(w io.Writer) bool {
	f, ok := w.(*os.File)
	if !ok {
		return false
	}
	st, err := f.Stat()
	return err == nil && st.Mode()&os.ModeCharDevice != 0
}

// colorOK reports whether w is a terminal that takes ANSI styles
// (https://no-color.org: NO_COLOR turns them off).
func colorOK(w io.Writer) bool {
	return isTerminal(w) && os.Getenv("NO_COLOR") == "" && os.Getenv("TERM") != "dumb"
}
