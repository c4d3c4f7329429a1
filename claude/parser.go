package claude

import (
	"bytes"
	"fmt"
	"io"
	"log/slog"
	"strings"
	"time"

	"github.com/tidwall/gjson"

	"github.com/agentbox/agentbox/chat"
	"github.com/agentbox/agentbox/executor/agentcli"
)

// Notice codes raised by the parser. They appear as the code prop of notice
// events and in executor.Result.Notices.
const (
	// NoticeMCPFailed: an MCP server did not connect (init reports a status
	// other than connected or pending).
	NoticeMCPFailed = agentcli.NoticeMCPFailed
	// NoticeSkillMissing: a skill the assistant defines is not among the
	// skills the CLI loaded.
	NoticeSkillMissing = "skill_missing"
	// NoticePermissionDenied: the CLI refused a tool call.
	NoticePermissionDenied = "permission_denied"
	// NoticeRepeatedToolFailure: the same tool failed several times in a
	// row (seed 004 "repeated-tool-error").
	NoticeRepeatedToolFailure = agentcli.NoticeRepeatedToolFailure
	// NoticeMaxTurnsNear: the agent keeps calling tools with only a few of
	// its max_turns left (seed 004 "max-steps-approaching").
	NoticeMaxTurnsNear = "max_turns_near"
	// NoticeAPIRetry: the CLI is retrying a failed model API call (the
	// code of a loading message, not a notice).
	NoticeAPIRetry = "api_retry"
	// NoticeStreamCut: the model's answer stream was cut short; the text
	// it had shown was taken back (a replace event) and the CLI retried.
	NoticeStreamCut = "stream_cut"
	// NoticeCompacted: the CLI summarized the conversation to fit the
	// model's context.
	NoticeCompacted = "compacted"
	// NoticeCompactFailed: a compaction failed.
	NoticeCompactFailed = "compact_failed"
	// NoticeModelRefusal: the model refused; the CLI may have switched to
	// a fallback model.
	NoticeModelRefusal = "model_refusal"
	// NoticeRateLimit: the account's rate limit is near or reached.
	NoticeRateLimit = "rate_limit"
	// NoticeTaskFailed and NoticeTaskStopped: a task the agent started (a
	// subagent, a background command) failed or was stopped.
	NoticeTaskFailed  = "task_failed"
	NoticeTaskStopped = "task_stopped"
	// NoticeFollowUpFailed: after its answer, a turn the CLI ran on its
	// own (when background work ended) failed; the answer stands.
	NoticeFollowUpFailed = "follow_up_failed"
	// NoticeRequiresAction: the CLI waits for input nobody can give.
	NoticeRequiresAction = "requires_action"
	// NoticeSessionNotSaved: the CLI could not write its session; the next
	// turn may not resume this one.
	NoticeSessionNotSaved = "session_not_saved"
	// NoticeLineDropped: the CLI printed a line longer than the parser
	// holds; it was dropped.
	NoticeLineDropped = agentcli.NoticeLineDropped
	// Notices for what the CLI reports about itself: a hook or plugin
	// install that failed, an authentication problem, a shutdown, a
	// notification or warning it shows its users, a conversation reset.
	NoticeHookFailed          = "hook_failed"
	NoticePluginInstallFailed = "plugin_install_failed"
	NoticeAuth                = "auth"
	NoticeShuttingDown        = "cli_shutting_down"
	NoticeNotification        = "cli_notification"
	NoticeWarning             = "cli_warning"
	NoticeConversationReset   = "conversation_reset"
)

// Defaults for ParserOptions.
const (
	DefaultFailureThreshold = agentcli.DefaultFailureThreshold
	DefaultNearMaxTurns     = 2
	// DefaultMaxEventContent caps a tool result's content in events; the
	// full size is reported in the content_bytes prop.
	DefaultMaxEventContent = agentcli.DefaultMaxEventContent
	// DefaultMaxRetryWait is the longest wait before a model API retry a
	// turn accepts: a rate limit that asks for more ends the turn at once
	// with the model's error.
	DefaultMaxRetryWait = 10 * time.Second
)

// ParserOptions configure a Parser. The zero value is usable.
type ParserOptions struct {
	// IDPrefix starts every event id ("cc" when empty): ids are
	// IDPrefix-1, IDPrefix-2, ... in the order messages start.
	IDPrefix string
	// MaxTurns is the run's --max-turns, for the max_turns_near notice
	// (0: no such notice).
	MaxTurns int
	// NearMaxTurns is how many turns before MaxTurns the notice is raised
	// (DefaultNearMaxTurns when 0).
	NearMaxTurns int
	// FailureThreshold is how many consecutive failures of one tool raise
	// repeated_tool_failure (DefaultFailureThreshold when 0).
	FailureThreshold int
	// Skills are the skill names the assistant defines; one missing from
	// the init message's skills raises skill_missing.
	Skills []string
	// MaxEventContent caps tool result content in events
	// (DefaultMaxEventContent when 0; the Outcome keeps the same cap).
	MaxEventContent int
	// MaxRetryWait is the longest wait before a model API retry the turn
	// accepts (DefaultMaxRetryWait when 0, negative: any); MaxAPIRetries,
	// when positive, the most retries. A retry past either stops the CLI
	// (Monitor.Stop) with the model's error.
	MaxRetryWait  time.Duration
	MaxAPIRetries int
	// Monitor, when set, is told what the CLI is doing as lines are parsed
	// (from the parsing goroutine): an agentcli.Run.
	Monitor agentcli.Monitor
}

// Outcome is what a parsed stream amounts to.
type Outcome struct {
	agentcli.Outcome
	// APIErrorStatus is the last HTTP status the CLI reported for a failed
	// model API call (api_retry, an API error message or a result), 0 if
	// none.
	APIErrorStatus int `json:"api_error_status,omitempty"`
	// Results is how many results the CLI printed: more than one when it
	// ran follow-up turns as background work ended.
	Results int `json:"results,omitempty"`
	// Tasks is how many tasks (subagents, background commands) it
	// started; TasksLeft how many had not ended at the end of the output.
	Tasks     int `json:"tasks,omitempty"`
	TasksLeft int `json:"tasks_left,omitempty"`
	// Discarded counts the bytes of streamed text taken back because their
	// stream was cut short.
	Discarded int `json:"discarded_bytes,omitempty"`
	// Unknown counts lines of a kind the parser does not know (a newer
	// CLI): dropped.
	Unknown int `json:"unknown,omitempty"`
	agentcli.LineStats
}

// NoResult gives a run that ended without a result its error code
// (agentcli.Finished): the CLI reports the model API's last failure,
// without a result the likeliest reason.
func (o *Outcome) NoResult(string) (code, note string) {
	if o.APIErrorStatus == 0 {
		return chat.ErrExecutor, ""
	}
	return errorCode("", o.APIErrorStatus, ""), fmt.Sprintf("the model API last answered HTTP %d", o.APIErrorStatus)
}

// LogValue is what the driver logs of the outcome.
func (o *Outcome) LogValue() slog.Value {
	return o.LogGroup(append(o.LineStats.LogAttrs(), slog.Int("results", o.Results), slog.Int("tasks", o.Tasks),
		slog.Int("tasks_left", o.TasksLeft), slog.Int("unknown", o.Unknown), slog.Int("discarded_bytes", o.Discarded))...)
}

// Parser turns Claude Code's stream-json output into chat events. Feed it
// lines with Line (or a whole stream with Parse) and call Close at the
// end. It is not safe for concurrent use; events are emitted from the
// calling goroutine, in order. Every kind of line the CLI prints is
// handled as the package documentation's table says.
type Parser struct {
	emit chat.EmitFunc
	opts ParserOptions
	mon  agentcli.Monitor
	ev   agentcli.Events // event ids, notices
	line agentcli.Line   // the line being handled (for its cuts)

	blocks   map[blockKey]*block
	streamed map[msgKey]bool   // messages seen through stream events
	turns    map[string]bool   // main-agent message ids
	toolIdx  map[string]int    // tool id -> index in out.ToolCalls
	toolName []string          // by index: the name the tool id last had
	denied   map[string]bool   // tool ids a denial was reported for
	running  map[string]bool   // main-agent tools called, without a result yet
	progress map[string]string // tool id -> its open loading message
	tasks    map[string]*task  // tasks started, not ended
	pending  []*block          // main-agent text streamed, not yet confirmed

	streamMsg string // the main agent's message being streamed

	nearSent    bool
	sessionSent bool
	compacting  string // open loading message of a compaction
	// workAfter reports work the CLI started after its last result (a
	// task ended, a follow-up turn began): another result is coming.
	workAfter bool
	answered  bool // a successful result was seen
	// awaiting are the uuids of the messages sent into the turn (Say)
	// the CLI has not taken yet. interrupted is set from an interrupt
	// (Interrupt) to the result that ends it; interrupts counts them.
	awaiting    map[string]bool
	interrupts  int
	interrupted bool
	apiErr      *apiError
	usage       usageSum

	answer strings.Builder
	out    Outcome
}

// apiError is a model API failure the CLI reported in an assistant
// message.
type apiError struct {
	status  int
	kind    string
	message string
}

// nopMonitor is the Monitor of a parser given none.
type nopMonitor struct{}

func (nopMonitor) Answered()    {}
func (nopMonitor) Busy(bool)    {}
func (nopMonitor) Settled(bool) {}
func (nopMonitor) Stop()        {}

// NewParser returns a parser that sends events to emit.
func NewParser(emit chat.EmitFunc, opts ParserOptions) *Parser {
	if opts.IDPrefix == "" {
		opts.IDPrefix = "cc"
	}
	if opts.NearMaxTurns <= 0 {
		opts.NearMaxTurns = DefaultNearMaxTurns
	}
	if opts.FailureThreshold <= 0 {
		opts.FailureThreshold = DefaultFailureThreshold
	}
	if opts.MaxEventContent <= 0 {
		opts.MaxEventContent = DefaultMaxEventContent
	}
	if opts.MaxRetryWait == 0 {
		opts.MaxRetryWait = DefaultMaxRetryWait
	}
	mon := opts.Monitor
	if mon == nil {
		mon = nopMonitor{}
	}
	return &Parser{
		emit:     emit,
		opts:     opts,
		mon:      mon,
		ev:       agentcli.NewEvents(emit, opts.IDPrefix, opts.FailureThreshold),
		blocks:   map[blockKey]*block{},
		streamed: map[msgKey]bool{},
		turns:    map[string]bool{},
		toolIdx:  map[string]int{},
		denied:   map[string]bool{},
		running:  map[string]bool{},
		progress: map[string]string{},
		tasks:    map[string]*task{},
	}
}

// lineOptions are how the CLI's output is read for a parser that shows
// maxContent bytes of a tool result: lines up to agentcli.DefaultMaxLine,
// and the strings of a long user line (tool results) kept to a little
// more than maxContent, so memory stays flat whatever the CLI prints.
func lineOptions(maxContent int) agentcli.LineOptions {
	return agentcli.LineOptions{KeepString: maxContent + 16, Elide: isUserLine}
}

// Parse reads r to its end, line by line (a recorded transcript). It
// returns nil at EOF and the read error otherwise. It does not call
// Close.
func (p *Parser) Parse(r io.Reader) error {
	return agentcli.ReadLines(r, lineOptions(p.opts.MaxEventContent), p.Line)
}

// Finish is Close (agentcli.Parser).
func (p *Parser) Finish() agentcli.Finished { return p.Close() }

// isUserLine reports a line that starts as a user message (the CLI prints
// type first in them): only their tool results are read, capped.
func isUserLine(start []byte) bool {
	rest := bytes.TrimLeft(bytes.TrimSpace(start), "{ \t")
	return bytes.HasPrefix(rest, []byte(`"type"`)) && gjson.GetBytes(start, "type").Str == "user"
}

// Line handles one line of output. Lines that are not JSON objects are
// counted and dropped (see agentcli.LineStats); so is a line the reader
// dropped for its length, with a notice. The parser does not retain the
// line.
func (p *Parser) Line(line agentcli.Line) {
	s, ok := p.out.Object(line)
	if !ok {
		if line.Dropped {
			p.ev.LineDropped(line.Size)
		}
		return
	}
	p.line = line
	p.dispatch(s)
	p.line = agentcli.Line{}
	p.report()
}

// dispatch handles a JSON object line by its type.
func (p *Parser) dispatch(line string) {
	typ := gjson.Get(line, "type")
	if typ.Type != gjson.String {
		p.out.Skipped++
		return
	}
	switch typ.Str {
	case "stream_event":
		p.streamEvent(line)
	case "assistant":
		p.assistant(line)
	case "user":
		p.user(line)
	case "system":
		p.system(line)
	case "result":
		p.result(line)
	case "tool_progress":
		p.toolProgress(line)
	case "rate_limit_event":
		p.rateLimit(line)
	case "auth_status":
		if e := gjson.Get(line, "error"); e.String() != "" {
			p.ev.Notice(NoticeAuth, "authentication: "+agentcli.String(e), nil)
		}
	case "conversation_reset":
		p.ev.Notice(NoticeConversationReset, "the CLI started a new conversation ("+
			cmpOr(gjson.Get(line, "trigger").String(), "reset")+"); what came before is no longer in its context", nil)
	case "control_response":
		p.controlResponse(line)
	case "tool_use_summary", "prompt_suggestion":
		// Dropped: see the package documentation.
	default:
		p.out.Unknown++
	}
}

// report tells the monitor what the CLI is doing.
func (p *Parser) report() {
	p.mon.Busy(len(p.running) > 0 || len(p.tasks) > 0)
	p.mon.Settled(p.out.GotResult && len(p.tasks) == 0 && !p.workAfter && len(p.awaiting) == 0)
}

// Close ends every message still open (output cut short) and returns the
// outcome. Further lines are not expected after Close.
func (p *Parser) Close() *Outcome {
	p.discard("output ended")
	p.closeBlocks(func(blockKey) bool { return true })
	for id, msg := range p.progress {
		p.endLoading(msg, nil)
		delete(p.progress, id)
	}
	for _, t := range p.sortedTasks() {
		p.endLoading(t.msg, map[string]any{"status": "unknown"})
	}
	if p.compacting != "" {
		p.endLoading(p.compacting, nil)
		p.compacting = ""
	}
	p.out.TasksLeft = len(p.tasks)
	p.out.Notices = p.ev.Notices()
	p.out.Usage = p.usage.total()
	if p.out.Content == "" {
		p.out.Content = p.answer.String()
	}
	return &p.out
}

// endLoading ends a loading message.
func (p *Parser) endLoading(id string, props map[string]any) {
	p.emit(chat.Event{Event: chat.End, ID: id, Type: chat.TypeLoading, Props: props})
}

func cmpOr(a, b string) string {
	if a != "" {
		return a
	}
	return b
}
