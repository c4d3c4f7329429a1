package cursor

import (
	"cmp"
	"strconv"
	"strings"

	"github.com/tidwall/gjson"

	"github.com/agentbox/agentbox/chat"
	"github.com/agentbox/agentbox/executor/agentcli"
)

// toolNames are the chat names of the tool kinds the CLI reports as
// tool_call.<kind> (output-format documentation: readToolCall,
// writeToolCall; the others as the CLI prints them). A kind not listed is
// passed through under its own key name.
var toolNames = map[string]string{
	"readToolCall":        "read",
	"writeToolCall":       "write",
	"editToolCall":        "edit",
	"deleteToolCall":      "delete",
	"shellToolCall":       "shell",
	"globToolCall":        "glob",
	"grepToolCall":        "grep",
	"lsToolCall":          "ls",
	"mcpToolCall":         "mcp",
	"todoToolCall":        "todo",
	"updateTodosToolCall": "todo",
	"readTodosToolCall":   "read_todos",
	"semSearchToolCall":   "semantic_search",
	"webSearchToolCall":   "web_search",
	"webFetchToolCall":    "web_fetch",
	"readLintsToolCall":   "read_lints",
}

// toolBody returns the kind (the single key of the tool_call object) and
// its value. Keys whose value is not an object are skipped.
func toolBody(tc gjson.Result) (kind string, body gjson.Result) {
	if !tc.IsObject() {
		return "", body
	}
	tc.ForEach(func(k, v gjson.Result) bool {
		if v.IsObject() && k.Str != "" {
			kind, body = strings.Clone(k.Str), v
			return false
		}
		return true
	})
	return kind, body
}

// describeTool returns a tool's chat name and its JSON input.
func describeTool(kind string, body gjson.Result) (string, chat.RawJSON) {
	if kind == "function" {
		// Documented alternative: {"name": ..., "arguments": "<json>"}.
		name := cmp.Or(agentcli.String(body.Get("name")), "function")
		args := body.Get("arguments")
		switch {
		case args.Type == gjson.String && gjson.Valid(args.Str) && strings.HasPrefix(strings.TrimSpace(args.Str), "{"):
			return name, chat.RawJSON(strings.TrimSpace(args.Str))
		case args.IsObject():
			return name, chat.RawJSON(strings.Clone(args.Raw))
		case args.Exists():
			return name, jsonObject("arguments", args.String())
		}
		return name, chat.RawJSON("{}")
	}
	args := body.Get("args")
	input := chat.RawJSON("{}")
	if args.IsObject() {
		input = chat.RawJSON(strings.Clone(args.Raw))
	}
	name, ok := toolNames[kind]
	if !ok {
		name = kind
	}
	if kind == "mcpToolCall" {
		server := cmp.Or(agentcli.String(args.Get("providerIdentifier")), agentcli.String(args.Get("serverName")), agentcli.String(args.Get("server")))
		tool := cmp.Or(agentcli.String(args.Get("toolName")), agentcli.String(args.Get("name")))
		switch {
		case server != "" && tool != "":
			name = "mcp__" + server + "__" + tool
		case tool != "":
			name = "mcp__" + tool
		}
	}
	return name, input
}

func jsonObject(key, value string) chat.RawJSON {
	return chat.RawJSON(`{"` + key + `":` + strconv.Quote(value) + `}`)
}

// outcomeOf is a tool result as shown to the client.
type outcomeOf struct {
	content   string
	size      int
	truncated bool
	isErr     bool
}

// toolResult reads a completed call's result: {"success": {...}} is a
// success (a shell command that exited non-zero excepted), any other key
// ({"error": ...}, {"failure": ...}, {"rejected": ...}) a failure.
func toolResult(kind string, body gjson.Result, line agentcli.Line, max int) outcomeOf {
	res := body.Get("result")
	if kind == "function" && !res.Exists() {
		res = body.Get("output")
	}
	if !res.IsObject() {
		if res.Type == gjson.String {
			return capped(res, line, max, false)
		}
		return outcomeOf{}
	}
	var key string
	var val gjson.Result
	res.ForEach(func(k, v gjson.Result) bool {
		key, val = k.Str, v
		return false
	})
	if key == "success" {
		o := successContent(kind, val, line, max)
		if kind == "shellToolCall" && val.Get("exitCode").Int() != 0 {
			o.isErr = true
		}
		return o
	}
	o := failureContent(kind, key, val, line, max)
	o.isErr = true
	return o
}

func successContent(kind string, v gjson.Result, line agentcli.Line, max int) outcomeOf {
	switch kind {
	case "shellToolCall":
		return shellContent(v, line, max)
	case "mcpToolCall":
		if c := v.Get("content"); c.IsArray() {
			var sb strings.Builder
			c.ForEach(func(_, item gjson.Result) bool {
				var t string
				switch tx := item.Get("text"); {
				case tx.Type == gjson.String:
					t = tx.String()
				case tx.IsObject():
					t = tx.Get("text").String()
				}
				if t == "" {
					return true
				}
				if sb.Len() > 0 {
					sb.WriteByte('\n')
				}
				sb.WriteString(t)
				return sb.Len() <= max
			})
			return capString(sb.String(), max)
		}
	}
	if c := v.Get("content"); c.Type == gjson.String {
		return capped(c, line, max, false)
	}
	if v.Type == gjson.String {
		return capped(v, line, max, false)
	}
	return capString(strings.Clone(v.Raw), max)
}

// shellContent is a command's output: stdout, then stderr, then the exit
// code when it is not zero.
func shellContent(v gjson.Result, line agentcli.Line, max int) outcomeOf {
	r := []gjson.Result{v.Get("stdout"), v.Get("stderr"), v.Get("exitCode")}
	// What the line reader dropped of the output counts in its size.
	dropped := line.DroppedAt(r[0].Index) + line.DroppedAt(r[1].Index)
	var sb strings.Builder
	sb.WriteString(r[0].String())
	if e := r[1].String(); e != "" {
		if sb.Len() > 0 && !strings.HasSuffix(sb.String(), "\n") {
			sb.WriteByte('\n')
		}
		sb.WriteString(e)
	}
	if c := r[2].Int(); c != 0 {
		if sb.Len() > 0 && !strings.HasSuffix(sb.String(), "\n") {
			sb.WriteByte('\n')
		}
		sb.WriteString("exit code " + strconv.FormatInt(c, 10))
	}
	t := agentcli.CapString(sb.String(), sb.Len()+dropped, max)
	return outcomeOf{content: t.Content, size: t.Size, truncated: t.Truncated}
}

func failureContent(kind, key string, v gjson.Result, line agentcli.Line, max int) outcomeOf {
	if kind == "shellToolCall" && v.IsObject() && (v.Get("stdout").Exists() || v.Get("exitCode").Exists()) {
		return shellContent(v, line, max)
	}
	if v.Type == gjson.String {
		return capped(v, line, max, true)
	}
	for _, k := range []string{"error", "message", "errorMessage", "reason"} {
		if e := v.Get(k); e.Type == gjson.String && e.Str != "" {
			return capped(e, line, max, true)
		}
		if e := v.Get(k + ".message"); e.Type == gjson.String && e.Str != "" {
			return capped(e, line, max, true)
		}
	}
	return capString(key+": "+strings.Clone(v.Raw), max)
}

// capped is a JSON value's text capped at max bytes (agentcli.CapText).
func capped(r gjson.Result, line agentcli.Line, max int, isErr bool) outcomeOf {
	t := agentcli.CapText(r, line, max)
	return outcomeOf{content: t.Content, size: t.Size, truncated: t.Truncated, isErr: isErr}
}

func capString(s string, max int) outcomeOf {
	t := agentcli.CapString(s, len(s), max)
	return outcomeOf{content: t.Content, size: t.Size, truncated: t.Truncated}
}
