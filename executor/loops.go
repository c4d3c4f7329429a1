package executor

import (
	"crypto/sha256"
	"fmt"
	"math"
	"strings"
	"sync"

	"github.com/agentbox/agentbox/assistant"
	"github.com/agentbox/agentbox/chat"
)

// Notice codes of the failure patterns Watch raises, beside the
// executors' own repeated_tool_failure and max_turns_near (seed 004).
const (
	// NoticeNoProgress: several tool results in a row added nothing new
	// (empty, or the same as one the turn already had).
	NoticeNoProgress = "no_progress"
	// NoticeToolRejection: the same tool was denied again and again.
	NoticeToolRejection = "tool_rejection"
	// NoticePermissionDenied is the notice an executor raises for a tool
	// call the CLI refused (props tool and tool_use_id); Watch counts it
	// as a denial of that tool.
	NoticePermissionDenied = "permission_denied"
)

// Suggested actions, the suggested_action prop of each notice.
const (
	SuggestNoProgress    = "Stop repeating the same calls: change approach, or ask the user for the missing information."
	SuggestToolRejection = "Stop calling this tool: it is not allowed here. Use an allowed tool, or ask the user to allow it (the assistant's sandbox arguments: allowed_tools, permission_mode)."
)

// maxDenialText is how much of a result IsDenial reads.
const maxDenialText = 2 << 10

// denialTexts are the ways CLIs word a refused tool call in its result
// (lower case). A process's own "Permission denied" (EACCES) is a failure,
// not a refusal, and is not among them.
var denialTexts = []string{
	"haven't granted it yet",                          // Claude Code: a permission the mode does not give
	"denied by a permission rule",                     // Claude Code: a deny rule
	"blocked by permission settings",                  // Claude Code
	"no such tool available",                          // Claude Code: a disallowed tool
	"tool execution denied by policy",                 // Gemini CLI: a policy rule
	"requires user confirmation",                      // Gemini CLI: no one to confirm in non-interactive mode
	"rejected by user",                                // Codex: "exec command rejected by user", "patch rejected by user"
	"rejected by the user",                            // generic
	"rejected permission to use",                      // opencode: "The user rejected permission to use this specific tool call"
	"prevents you from using this specific tool call", // opencode: a deny rule
	"rejected by the permission configuration",        // Cursor CLI: a "rejected" result
}

// IsDenial reports whether a failed tool result's content says the tool
// call was refused rather than that it ran and failed. A refusal is short:
// only the first maxDenialText bytes are read.
func IsDenial(content string) bool {
	c := strings.ToLower(content[:min(len(content), maxDenialText)])
	if strings.HasPrefix(c, `tool "`) && strings.Contains(c, `" not found`) {
		// Gemini CLI: a tool its approval mode does not offer.
		return true
	}
	for _, t := range denialTexts {
		if strings.Contains(c, t) {
			return true
		}
	}
	return false
}

// Watch watches a turn's events for the failure patterns every executor
// shares: no progress (NoticeNoProgress) and tool-rejection loops
// (NoticeToolRejection). It reads the typed reports on the events any
// executor emits (Event.Result of the main agent's tool results,
// Event.Denial of refused calls), so an executor needs nothing of its own
// to have them; Emit is the turn's emit with Watch in front. Each notice is
// raised once per run of its pattern: a result with new content, or a
// successful call of the denied tool, arms it again. Safe for concurrent
// use.
type Watch struct {
	emit       chat.EmitFunc
	noProgress int // threshold, 0: off
	rejection  int

	mu      sync.Mutex
	seen    map[[sha256.Size]byte]bool // contents of the turn's results
	stale   int                        // results in a row that added nothing
	stuck   bool                       // NoticeNoProgress sent for this run
	denials map[string]int             // tool -> denials since it last worked
	denied  map[string]bool            // tool call ids counted as denials
	seq     int
	notices []string
}

// NewWatch returns a Watch of events going to emit, with a's thresholds
// (package.yao "failures"; the defaults when a is nil).
func NewWatch(emit chat.EmitFunc, a *assistant.Assistant) *Watch {
	var f assistant.Failures
	if a != nil {
		f = a.Failures
	}
	_, np, rej := f.Thresholds()
	return &Watch{emit: emit, noProgress: np, rejection: rej,
		seen: map[[sha256.Size]byte]bool{}, denials: map[string]int{}, denied: map[string]bool{}}
}

// FailureThreshold is the repeated_tool_failure threshold an executor's
// parser applies for a (math.MaxInt when the notice is off).
func FailureThreshold(a *assistant.Assistant) int {
	if a == nil {
		return assistant.DefaultRepeatedToolFailure
	}
	n, _, _ := a.Failures.Thresholds()
	if n == 0 {
		return math.MaxInt
	}
	return n
}

// Emit passes e on, then raises the notices e completes.
func (w *Watch) Emit(e chat.Event) {
	w.emit(e)
	switch r, d := e.Result, e.Denial; {
	case r != nil && r.Parent == "": // a subagent's is its own loop
		w.result(r.Name, r.ToolCallID, r.Content, r.IsError)
	case d != nil:
		w.deny(d.Tool, d.ToolUseID)
	}
}

// Notices returns the codes Watch raised, in order.
func (w *Watch) Notices() []string {
	w.mu.Lock()
	defer w.mu.Unlock()
	return append([]string(nil), w.notices...)
}

func (w *Watch) result(name, id, content string, isErr bool) {
	if isErr {
		// A failure is the executors' repeated_tool_failure; a refusal is
		// counted here. Neither is progress, nor its absence.
		if IsDenial(content) {
			w.deny(name, id)
		}
		return
	}
	w.mu.Lock()
	delete(w.denials, name)
	sum := sha256.Sum256([]byte(strings.TrimSpace(content)))
	fresh := strings.TrimSpace(content) != "" && !w.seen[sum]
	w.seen[sum] = true
	if fresh {
		w.stale, w.stuck = 0, false
		w.mu.Unlock()
		return
	}
	w.stale++
	raise := w.noProgress > 0 && w.stale >= w.noProgress && !w.stuck
	if raise {
		w.stuck = true
	}
	n := w.stale
	w.mu.Unlock()
	if raise {
		w.notice(NoticeNoProgress,
			fmt.Sprintf("the last %d tool results added nothing new; the agent may be going in circles", n),
			map[string]any{"count": n, "tool": name, "suggested_action": SuggestNoProgress})
	}
}

func (w *Watch) deny(tool, id string) {
	w.mu.Lock()
	if id != "" {
		if w.denied[id] {
			w.mu.Unlock()
			return
		}
		w.denied[id] = true
	}
	w.denials[tool]++
	n := w.denials[tool]
	raise := w.rejection > 0 && n == w.rejection
	w.mu.Unlock()
	if raise {
		t := tool
		if t == "" {
			t = "a tool"
		}
		w.notice(NoticeToolRejection,
			fmt.Sprintf("%s was denied %d times; the agent keeps calling a tool it may not use", t, n),
			map[string]any{"count": n, "tool": tool, "suggested_action": SuggestToolRejection})
	}
}

func (w *Watch) notice(code, msg string, props map[string]any) {
	w.mu.Lock()
	w.seq++
	id := fmt.Sprintf("watch-%d", w.seq)
	w.notices = append(w.notices, code)
	w.mu.Unlock()
	props["code"], props["message"] = code, msg
	chat.Whole(w.emit, id, chat.TypeNotice, msg, props)
}
