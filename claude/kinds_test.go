package claude

import (
	"flag"
	"fmt"
	"os"
	"regexp"
	"slices"
	"strings"
	"testing"

	"github.com/agentbox/agentbox/chat"
	"github.com/agentbox/agentbox/chat/chattest"
	"github.com/agentbox/agentbox/executor/agentcli"
	"github.com/agentbox/agentbox/internal/testenv"
)

var updateDoc = flag.Bool("update-doc", false, "rewrite the message kind table in doc.go from kinds.go")

// sdkKind is a member of the SDK's SDKMessage union: its type and the
// subtypes it may have.
type sdkKind struct {
	name     string
	typ      string
	subtypes []string
}

// sdkKinds reads the SDKMessage union of sdk.d.ts and the type and
// subtypes of each member (resolving members that are unions themselves).
func sdkKinds(t *testing.T, src string) []sdkKind {
	t.Helper()
	src = stripComments(src)
	m := regexp.MustCompile(`export declare type SDKMessage = ([^;]+);`).FindStringSubmatch(src)
	if m == nil {
		t.Fatal("sdk.d.ts declares no SDKMessage union")
	}
	var out []sdkKind
	var add func(name string, depth int)
	add = func(name string, depth int) {
		body := declaration(src, name)
		if body == "" || depth > 3 {
			t.Fatalf("sdk.d.ts: no declaration of %s", name)
		}
		if body[0] != '{' {
			for _, n := range strings.Split(body, "|") {
				add(strings.TrimSpace(n), depth+1)
			}
			return
		}
		k := sdkKind{name: name}
		for _, member := range topMembers(body) {
			key, val, ok := strings.Cut(member, ":")
			if !ok {
				continue
			}
			switch strings.TrimSpace(key) {
			case "type":
				k.typ = strings.Trim(strings.TrimSpace(val), "'")
			case "subtype":
				for _, v := range strings.Split(val, "|") {
					k.subtypes = append(k.subtypes, strings.Trim(strings.TrimSpace(v), "'"))
				}
			}
		}
		if k.typ == "" {
			t.Fatalf("sdk.d.ts: %s has no type member", name)
		}
		out = append(out, k)
	}
	for _, n := range strings.Split(m[1], "|") {
		add(strings.TrimSpace(n), 0)
	}
	return out
}

// stripComments removes /* */ and // comments.
func stripComments(s string) string {
	s = regexp.MustCompile(`(?s)/\*.*?\*/`).ReplaceAllString(s, "")
	return regexp.MustCompile(`(?m)^\s*//.*$`).ReplaceAllString(s, "")
}

// declaration returns the right-hand side of `export declare type NAME =`
// (or `declare type NAME =`), up to its closing semicolon.
func declaration(src, name string) string {
	loc := regexp.MustCompile(`(?m)^(export )?declare type ` + regexp.QuoteMeta(name) + `(<[^=]*>)? = `).FindStringIndex(src)
	if loc == nil {
		return ""
	}
	depth, quote := 0, byte(0)
	for i := loc[1]; i < len(src); i++ {
		c := src[i]
		switch {
		case quote != 0:
			if c == quote && src[i-1] != '\\' {
				quote = 0
			}
		case c == '\'' || c == '"' || c == '`':
			quote = c
		case c == '{' || c == '(' || c == '[':
			depth++
		case c == '}' || c == ')' || c == ']':
			depth--
		case c == ';' && depth == 0:
			return strings.TrimSpace(src[loc[1]:i])
		}
	}
	return ""
}

// topMembers splits an object type's body into its members.
func topMembers(body string) []string {
	var out []string
	depth, start := 0, 1
	for i := 0; i < len(body); i++ {
		switch body[i] {
		case '{', '(', '[':
			depth++
		case '}', ')', ']':
			depth--
		case ';':
			if depth == 1 {
				out = append(out, strings.TrimSpace(body[start:i]))
				start = i + 1
			}
		}
	}
	return out
}

// TestKindsCoverSDK: every kind the installed Agent SDK declares is in the
// table, with its type and subtypes; a kind the SDK adds fails here
// instead of being dropped silently.
func TestKindsCoverSDK(t *testing.T) {
	t.Parallel()
	b, err := os.ReadFile(testenv.ClaudeSDK(t))
	if err != nil {
		t.Fatal(err)
	}
	kinds := sdkKinds(t, string(b))
	if len(kinds) < 30 {
		t.Fatalf("read only %d kinds from sdk.d.ts", len(kinds))
	}
	seen := map[string]bool{}
	for _, k := range kinds {
		seen[k.name] = true
		i := slices.IndexFunc(messageKinds, func(m messageKind) bool { return m.SDK == k.name })
		if i < 0 {
			t.Errorf("%s (type %q, subtype %q) is not in messageKinds: map it to chat events or write why it is dropped", k.name, k.typ, k.subtypes)
			continue
		}
		m := messageKinds[i]
		want := []string{""}
		if len(k.subtypes) > 0 {
			want = k.subtypes
		}
		if m.Type != k.typ || !slices.Equal(want, strings.Split(m.Subtype, ", ")) {
			t.Errorf("%s is type %q subtype %q in sdk.d.ts, messageKinds says %q %q", k.name, k.typ, k.subtypes, m.Type, m.Subtype)
		}
	}
	for _, m := range messageKinds {
		if !seen[m.SDK] {
			t.Errorf("messageKinds lists %s, which sdk.d.ts no longer declares", m.SDK)
		}
	}
}

// docTable renders messageKinds as the package documentation shows it.
func docTable() string {
	var sb strings.Builder
	sb.WriteString("//\t| type | subtype | SDK type | chat event | what, or why dropped |\n")
	sb.WriteString("//\t|---|---|---|---|---|\n")
	for _, m := range messageKinds {
		ev := m.Event
		if ev == "" {
			ev = "dropped"
		}
		fmt.Fprintf(&sb, "//\t| %s | %s | %s | %s | %s |\n", m.Type, m.Subtype, m.SDK, ev, m.Why)
	}
	return sb.String()
}

// TestKindsInDoc: the package documentation shows the table as it is
// (go test ./claude -run KindsInDoc -update-doc rewrites it).
func TestKindsInDoc(t *testing.T) {
	b, err := os.ReadFile("doc.go")
	if err != nil {
		t.Fatal(err)
	}
	doc := string(b)
	const begin, end = "//\t| type | subtype |", "//\n// The parser"
	i, j := strings.Index(doc, begin), strings.Index(doc, end)
	if i < 0 || j < i {
		t.Fatalf("doc.go has no message kind table (between %q and %q)", begin, end)
	}
	if want := docTable(); doc[i:j] != want {
		if *updateDoc {
			if err := os.WriteFile("doc.go", []byte(doc[:i]+want+doc[j:]), 0o644); err != nil {
				t.Fatal(err)
			}
			return
		}
		t.Errorf("doc.go's message kind table differs from kinds.go (go test ./claude -run KindsInDoc -update-doc)")
	}
}

// kindSamples are lines of each kind, as the CLI prints them (from
// recorded transcripts, or built from sdk.d.ts), that make the parser do
// what the table says.
var kindSamples = map[string][]string{
	"SDKAssistantMessage": {`{"type":"assistant","message":{"id":"m1","content":[{"type":"text","text":"hi"}]},"parent_tool_use_id":null}`,
		`{"type":"assistant","message":{"id":"x","model":"<synthetic>","content":[{"type":"text","text":"API Error: 500"}]},"parent_tool_use_id":null,"error":"server_error","is_api_error_message":true,"api_error_status":500}`,
		`{"type":"result","subtype":"success","is_error":true,"api_error_status":500,"num_turns":1,"result":"API Error: 500"}`},
	"SDKUserMessage":                   {`{"type":"user","message":{"role":"user","content":[{"type":"tool_result","tool_use_id":"t1","content":"ok"}]},"parent_tool_use_id":null}`},
	"SDKUserMessageReplay":             {`{"type":"user","message":{"role":"user","content":"hello"},"parent_tool_use_id":null,"isReplay":true,"uuid":"u","session_id":"s"}`},
	"SDKResultSuccess":                 {`{"type":"result","subtype":"success","is_error":false,"num_turns":1,"result":"Done."}`},
	"SDKResultError":                   {`{"type":"result","subtype":"error_max_turns","is_error":true,"num_turns":3,"errors":["Reached maximum number of turns (3)"]}`},
	"SDKSystemMessage":                 {`{"type":"system","subtype":"init","session_id":"s","model":"m","tools":[],"mcp_servers":[{"name":"x","status":"failed"}],"skills":[]}`},
	"SDKPartialAssistantMessage":       {`{"type":"stream_event","event":{"type":"content_block_start","index":0,"content_block":{"type":"thinking","thinking":""}},"parent_tool_use_id":null}`},
	"SDKCompactBoundaryMessage":        {`{"type":"system","subtype":"compact_boundary","compact_metadata":{"trigger":"auto","pre_tokens":150000,"post_tokens":20000}}`},
	"SDKStatusMessage":                 {`{"type":"system","subtype":"status","status":"compacting"}`, `{"type":"system","subtype":"status","status":null,"compact_result":"failed","compact_error":"too big"}`},
	"SDKAPIRetryMessage":               {`{"type":"system","subtype":"api_retry","attempt":1,"max_retries":2,"retry_delay_ms":500,"error_status":529,"error":"overloaded"}`},
	"SDKControlRequestProgressMessage": {`{"type":"system","subtype":"control_request_progress","request_id":"r","status":"started"}`},
	"SDKModelRefusalFallbackMessage":   {`{"type":"system","subtype":"model_refusal_fallback","trigger":"refusal","direction":"retry","original_model":"a","fallback_model":"b","request_id":null,"content":"I can't help with that."}`},
	"SDKModelRefusalNoFallbackMessage": {`{"type":"system","subtype":"model_refusal_no_fallback","original_model":"a","request_id":null,"content":"I can't help with that."}`},
	"SDKLocalCommandOutputMessage":     {`{"type":"system","subtype":"local_command_output","content":"Total cost: $0.01"}`},
	"SDKHookStartedMessage":            {`{"type":"system","subtype":"hook_started","hook_id":"h","hook_name":"n","hook_event":"PreToolUse"}`},
	"SDKHookProgressMessage":           {`{"type":"system","subtype":"hook_progress","hook_id":"h","hook_name":"n","hook_event":"PreToolUse","stdout":"","stderr":"","output":""}`},
	"SDKHookResponseMessage":           {`{"type":"system","subtype":"hook_response","hook_id":"h","hook_name":"n","hook_event":"PreToolUse","output":"","stdout":"","stderr":"boom","outcome":"error"}`},
	"SDKPluginInstallMessage":          {`{"type":"system","subtype":"plugin_install","status":"failed","name":"p","error":"no network"}`},
	"SDKToolProgressMessage":           {`{"type":"tool_progress","tool_use_id":"t1","tool_name":"Bash","parent_tool_use_id":null,"elapsed_time_seconds":12}`},
	"SDKAuthStatusMessage":             {`{"type":"auth_status","isAuthenticating":false,"output":[],"error":"invalid key"}`},
	"SDKTaskNotificationMessage": {`{"type":"system","subtype":"task_started","task_id":"k","tool_use_id":"t1","description":"build","task_type":"local_bash"}`,
		`{"type":"system","subtype":"task_notification","task_id":"k","status":"failed","output_file":"","summary":"exit 2"}`},
	"SDKTaskStartedMessage": {`{"type":"system","subtype":"task_started","task_id":"k","tool_use_id":"t1","description":"build","task_type":"local_bash","is_backgrounded":true}`},
	"SDKTaskUpdatedMessage": {`{"type":"system","subtype":"task_started","task_id":"k","description":"build","task_type":"local_bash"}`,
		`{"type":"system","subtype":"task_updated","task_id":"k","patch":{"status":"killed"}}`},
	"SDKTaskProgressMessage": {`{"type":"system","subtype":"task_started","task_id":"k","description":"look","task_type":"local_agent","subagent_type":"Explore"}`,
		`{"type":"system","subtype":"task_progress","task_id":"k","description":"look","usage":{"total_tokens":100,"tool_uses":2,"duration_ms":5},"last_tool_name":"Grep"}`},
	"SDKBackgroundTasksChangedMessage": {`{"type":"system","subtype":"background_tasks_changed","tasks":[]}`},
	"SDKThinkingTokensMessage":         {`{"type":"system","subtype":"thinking_tokens","estimated_tokens":10,"estimated_tokens_delta":2}`},
	"SDKSessionStateChangedMessage":    {`{"type":"system","subtype":"session_state_changed","state":"requires_action"}`},
	"SDKWorkerShuttingDownMessage":     {`{"type":"system","subtype":"worker_shutting_down","reason":"restart"}`},
	"SDKCommandsChangedMessage":        {`{"type":"system","subtype":"commands_changed","commands":[]}`},
	"SDKNotificationMessage":           {`{"type":"system","subtype":"notification","key":"k","text":"Update available","priority":"low"}`},
	"SDKFilesPersistedEvent":           {`{"type":"system","subtype":"files_persisted","files":[],"failed":[],"processed_at":"x"}`},
	"SDKToolUseSummaryMessage":         {`{"type":"tool_use_summary","summary":"ran ls","preceding_tool_use_ids":["t1"]}`},
	"SDKMemoryRecallMessage":           {`{"type":"system","subtype":"memory_recall","mode":"select","memories":[]}`},
	"SDKRateLimitEvent":                {`{"type":"rate_limit_event","rate_limit_info":{"status":"allowed_warning","rateLimitType":"five_hour","utilization":0.9}}`},
	"SDKElicitationCompleteMessage":    {`{"type":"system","subtype":"elicitation_complete","mcp_server_name":"x","elicitation_id":"e"}`},
	"SDKPermissionDeniedMessage":       {`{"type":"system","subtype":"permission_denied","tool_name":"Bash","tool_use_id":"t1","message":"denied by rule"}`},
	"SDKPromptSuggestionMessage":       {`{"type":"prompt_suggestion","suggestion":"run the tests"}`},
	"SDKMirrorErrorMessage":            {`{"type":"system","subtype":"mirror_error","error":"x","key":{"projectKey":"p","sessionId":"s"}}`},
	"SDKInformationalMessage":          {`{"type":"system","subtype":"informational","content":"Settings file is invalid","level":"warning"}`},
	"SDKConversationResetMessage":      {`{"type":"conversation_reset","new_conversation_id":"c","trigger":"clear"}`},
	"SDKSessionWritesLostMessage":      {`{"type":"system","subtype":"session_writes_lost","error_code":"ENOSPC","lost":["transcript"]}`},
}

// TestKindsHandled: a line of each kind gives the events the table says
// (none for a dropped kind), and no kind is unknown to the parser.
func TestKindsHandled(t *testing.T) {
	t.Parallel()
	for _, m := range messageKinds {
		lines, ok := kindSamples[m.SDK]
		if !ok {
			t.Errorf("%s: no sample line", m.SDK)
			continue
		}
		var rec chattest.Recorder
		p := NewParser(rec.Emit, ParserOptions{Skills: nil})
		for _, l := range lines {
			p.Line(agentcli.Line{Bytes: []byte(l), Size: int64(len(l))})
		}
		out := p.Close()
		chattest.Check(t, rec.Events())
		if out.Unknown != 0 {
			t.Errorf("%s: the parser does not know it", m.SDK)
		}
		var got []string
		for _, e := range rec.Events() {
			if (e.Event == chat.Start || e.Event == chat.Replace) && !slices.Contains(got, e.Type) {
				got = append(got, e.Type)
			}
		}
		var want []string
		if m.Event != "" {
			want = strings.Split(m.Event, ", ")
		}
		if len(want) > 0 && len(got) == 0 {
			t.Errorf("%s: no event, want %v", m.SDK, want)
		}
		for _, g := range got {
			if !slices.Contains(want, g) {
				t.Errorf("%s: emits %s, which the table does not say", m.SDK, g)
			}
		}
	}
}
