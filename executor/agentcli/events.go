package agentcli

import (
	"fmt"
	"strconv"
	"strings"

	"github.com/tidwall/gjson"

	"github.com/agentbox/agentbox/chat"
	"github.com/agentbox/agentbox/executor"
)

// Notice codes every stream parser may raise. They appear as the code prop
// of notice events and in executor.Result.Notices; the executors share
// them so clients handle every CLI alike.
const (
	// NoticeMCPFailed: an MCP server did not connect.
	NoticeMCPFailed = "mcp_server_failed"
	// NoticeRepeatedToolFailure: the same tool failed several times in a
	// row (seed 004 "repeated-tool-error").
	NoticeRepeatedToolFailure = "repeated_tool_failure"
	// NoticeLineDropped: the CLI printed a line longer than a parser
	// holds (LineOptions.Max); it was dropped.
	NoticeLineDropped = "output_line_dropped"
	// NoticePermissionDenied: the CLI refused a tool call its
	// permission_mode leaves to a user's approval, which a headless run
	// cannot give (executor.Watch counts it as a denial).
	NoticePermissionDenied = executor.NoticePermissionDenied
)

// SuggestRepeatedToolFailure is the suggested_action prop of a
// repeated_tool_failure notice.
const SuggestRepeatedToolFailure = "Stop retrying the failing call: read its error, try another way, or ask the user for help."

// Caps every stream parser applies.
const (
	// DefaultFailureThreshold is how many consecutive failures of one tool
	// raise NoticeRepeatedToolFailure (see NewEvents).
	DefaultFailureThreshold = 3
	// DefaultMaxEventContent caps a tool result's content in events; the
	// full size is reported in the content_bytes prop.
	DefaultMaxEventContent = 1 << 20
	// MaxKeptResult caps each tool result an outcome keeps (KeptResult),
	// so a long run's outcome stays small.
	MaxKeptResult = 4 << 10
)

// KeptResult is what an outcome keeps of a tool result: s, cut to
// MaxKeptResult bytes on a UTF-8 boundary into memory of its own when it
// is longer (a short one is kept as it is: the caller owns it).
func KeptResult(s string) string {
	if len(s) > MaxKeptResult {
		return strings.Clone(CapUTF8(s, MaxKeptResult))
	}
	return s
}

// Events is the part of a stream parser that numbers the events it emits
// and raises the notices every CLI's stream shares. The zero value is not
// usable: make one with NewEvents. It is not safe for concurrent use (a
// parser emits from one goroutine).
type Events struct {
	emit      chat.EmitFunc
	prefix    string
	threshold int
	notices   []string

	next      int // last id number
	failTool  string
	failCount int
}

// NewEvents returns an Events that emits through emit. Event ids are
// prefix-1, prefix-2, ...; failureThreshold is how many consecutive
// failures of one tool raise NoticeRepeatedToolFailure
// (DefaultFailureThreshold when 0).
func NewEvents(emit chat.EmitFunc, prefix string, failureThreshold int) Events {
	if failureThreshold <= 0 {
		failureThreshold = DefaultFailureThreshold
	}
	return Events{emit: emit, prefix: prefix, threshold: failureThreshold}
}

// NewID returns the next event id.
func (e *Events) NewID() string {
	e.next++
	return e.prefix + "-" + strconv.Itoa(e.next)
}

// Seq is the number of the id NewID returned last (0 before the first):
// it orders the messages a parser started.
func (e *Events) Seq() int { return e.next }

// Notices returns the codes of the notices raised so far, in order (nil
// when none).
func (e *Events) Notices() []string { return e.notices }

// Notice emits a notice message with a new id: its text is message and
// its props code, message and extra's members.
func (e *Events) Notice(code, message string, extra map[string]any) {
	props := map[string]any{"code": code, "message": message}
	for k, v := range extra {
		props[k] = v
	}
	e.notices = append(e.notices, code)
	chat.Whole(e.emit, e.NewID(), chat.TypeNotice, message, props)
}

// Denied emits a NoticePermissionDenied notice with a new id for d, a
// call the CLI refused: its text is message, its props code, message,
// tool, tool_use_id and extra's members.
func (e *Events) Denied(d chat.Denial, message string, extra map[string]any) {
	e.notices = append(e.notices, NoticePermissionDenied)
	chat.WholeDenial(e.emit, e.NewID(), NoticePermissionDenied, message, d, extra)
}

// ToolResult tracks the outcome of a tool call of the main agent: when
// one tool fails the failure threshold's number of times in a row it raises
// NoticeRepeatedToolFailure (seed 004), a sign the agent is stuck. Any
// success, or a failure of another tool, starts the count anew.
func (e *Events) ToolResult(name string, isErr bool) {
	if !isErr {
		e.failTool, e.failCount = "", 0
		return
	}
	if name != e.failTool {
		e.failTool, e.failCount = name, 0
	}
	e.failCount++
	if e.failCount == e.threshold {
		tool := name
		if tool == "" {
			tool = "a tool"
		}
		e.Notice(NoticeRepeatedToolFailure,
			fmt.Sprintf("%s failed %d times in a row; the agent may be stuck", tool, e.failCount),
			map[string]any{"tool": name, "count": e.failCount, "suggested_action": SuggestRepeatedToolFailure})
	}
}

// ToolResultContent is ToolResult for a result whose content the parser
// has: a refused call (executor.IsDenial) is no failure of the tool (the
// pipeline's Watch counts it as a refusal, tool_rejection) and leaves the
// count as it was.
func (e *Events) ToolResultContent(name string, isErr bool, content string) {
	if isErr && executor.IsDenial(content) {
		return
	}
	e.ToolResult(name, isErr)
}

// MCPFailed raises NoticeMCPFailed for a server the CLI reports with a
// status other than connected.
func (e *Events) MCPFailed(server, status string) { e.MCPFailedWhy(server, status, "") }

// MCPFailedWhy is MCPFailed with detail, the CLI's reason, as a prop.
func (e *Events) MCPFailedWhy(server, status, detail string) {
	extra := map[string]any{"server": server, "status": status}
	if detail != "" {
		extra["detail"] = detail
	}
	e.Notice(NoticeMCPFailed,
		fmt.Sprintf("MCP server %q is not available (status %s); its tools are missing from this run", server, status),
		extra)
}

// LineDropped raises NoticeLineDropped for a line of size bytes the line
// reader dropped.
func (e *Events) LineDropped(size int64) {
	e.Notice(NoticeLineDropped,
		fmt.Sprintf("the CLI printed a line of %d bytes, more than a turn holds; it was dropped", size),
		map[string]any{"bytes": size})
}

// ServerStatus is an MCP server's state as a CLI reports it.
type ServerStatus struct {
	Name, Status string
}

// Session is what a CLI reports when its session starts.
type Session struct {
	ID, Model, Cwd string
	// Tools and Skills are the names the CLI reports (or, for a CLI that
	// does not list them, what the executor configured).
	Tools, Skills []string
	MCPServers    []ServerStatus
	// PermissionMode, Version and APIKeySource are what only some CLIs
	// report; each is a prop (permission_mode, version, api_key_source)
	// when set.
	PermissionMode, Version, APIKeySource string
}

// Session emits the session message: its props are session_id, model,
// tools, mcp_servers (name and status of each), skills, cwd and those of
// permission_mode, version and api_key_source that are set. A nil list is
// shown as an empty one.
func (e *Events) Session(s Session) {
	mcp := make([]map[string]any, 0, len(s.MCPServers))
	for _, m := range s.MCPServers {
		mcp = append(mcp, map[string]any{"name": m.Name, "status": m.Status})
	}
	props := map[string]any{
		"session_id":  s.ID,
		"model":       s.Model,
		"tools":       nonNil(s.Tools),
		"mcp_servers": mcp,
		"skills":      nonNil(s.Skills),
		"cwd":         s.Cwd,
	}
	for k, v := range map[string]string{"permission_mode": s.PermissionMode, "version": s.Version, "api_key_source": s.APIKeySource} {
		if v != "" {
			props[k] = v
		}
	}
	chat.Whole(e.emit, e.NewID(), chat.TypeSession, "", props)
}

func nonNil(s []string) []string {
	if s == nil {
		return []string{}
	}
	return s
}

// Strings returns the string values of a JSON array (of an object's
// members too), copied out of the line ([]string{} when there are none).
func Strings(r gjson.Result) []string {
	out := []string{}
	r.ForEach(func(_, v gjson.Result) bool { out = append(out, String(v)); return true })
	return out
}

// ServerStatuses reads the MCP servers of a CLI's init event: a JSON
// array of objects with a name and a status.
func ServerStatuses(r gjson.Result) []ServerStatus {
	var out []ServerStatus
	r.ForEach(func(_, v gjson.Result) bool {
		out = append(out, ServerStatus{String(v.Get("name")), String(v.Get("status"))})
		return true
	})
	return out
}
