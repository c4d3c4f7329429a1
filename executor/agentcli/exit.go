package agentcli

import (
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/agentbox/agentbox/chat"
	"github.com/agentbox/agentbox/executor"
	"github.com/agentbox/agentbox/sandbox"
)

// Exit is how a run ended.
type Exit struct {
	// Code is the process's exit code, Err the error waiting for it
	// (a timeout, a lost sandbox).
	Code int
	Err  error
	// Killed reports that the run stopped the CLI after its answer: it
	// did not exit within the grace period after its work was done, or
	// its background work was stopped as the timeout neared (Notices say
	// which), or the parser asked (Monitor.Stop).
	Killed bool
	// Idle reports that the watchdog stopped a CLI that printed nothing
	// for Spec.IdleTimeout while not busy.
	Idle bool
	// Notices are the codes of the notices the run emitted
	// (NoticeCLIHung, NoticeBackgroundStopped), in order.
	Notices []string
	// ParseErr is the error the output parser returned, or that the
	// output did not end after the process exited.
	ParseErr error
	// Stderr is the tail of the CLI's stderr, trimmed, secrets redacted.
	Stderr string
	// Started is when the process was started (zero when the turn ran on
	// a kept CLI), Began when the turn began.
	Started, Began time.Time
	// Alive reports a kept run whose turn is over and whose CLI runs on,
	// for the chat's next turn (Spec.Keep).
	Alive bool

	spec       *Spec
	answered   bool
	bgStopped  bool // the run stopped work left after the answer
	ctxStopped bool // the run stopped a kept CLI as its turn's contexts ended
	// Set when the turn's contexts ended (see turnState.stopped).
	stopCode, stopMsg string
}

// Parsed is what the output parser made of the stream, for Failure.
type Parsed struct {
	// GotResult reports that the CLI printed its result.
	GotResult bool
	// Err is the failure the CLI reported in its result; its error event
	// was emitted by the parser.
	Err *chat.Error
	// NoResult, when set, refines the error of a run that ended without a
	// result: from the stderr tail it returns the chat error code and a
	// note for the message ("" for none). Nil: chat.ErrExecutor.
	NoResult func(stderrTail string) (code, note string)
}

// Failure returns the run's error, nil when it succeeded, and emits its
// error event unless the parser did (Parsed.Err). In order:
//   - the failure the CLI reported itself (or the parser found), with the
//     stderr tail added; canceled or timeout instead when the turn's
//     contexts had ended;
//   - the watchdog stopped a CLI that had not answered (timeout);
//   - the process could not be waited for (a stop by the contexts is
//     canceled or timeout, a sandbox exec timeout is timeout, anything
//     else sandbox), unless the run stopped it after its answer;
//   - no result (executor, or what NoResult says), with the stderr's last
//     line;
//   - a non-zero exit after the result, unless the run stopped it.
func (x *Exit) Failure(p Parsed) *chat.Error {
	cli, tail := x.spec.CLI, x.Stderr
	afterAnswer := p.GotResult && (x.Killed || x.Idle || x.bgStopped)
	var err *chat.Error
	switch {
	case p.Err != nil && x.stopCode != "":
		// The turn's contexts ended first: what the CLI then reported (a
		// request the bridge refused past the deadline) follows from it.
		return &chat.Error{Code: x.stopCode, Message: x.stopMsg, Err: withStderr(tail, p.Err)}
	case p.Err != nil:
		p.Err.Err = withStderr(tail, p.Err.Err)
		return p.Err
	case x.Idle && !p.GotResult:
		msg := fmt.Sprintf("%s printed nothing for %s while no tool was running and was stopped (the CLI hung)", cli, x.spec.IdleTimeout.Round(time.Second))
		err = &chat.Error{Code: chat.ErrTimeout, Message: msg, Err: withStderr(tail, x.Err)}
	case (x.Err != nil || x.ctxStopped) && !afterAnswer:
		code, msg := chat.ErrSandbox, cli+": "+fmt.Sprint(x.Err)
		if x.stopCode != "" {
			code, msg = x.stopCode, x.stopMsg
		} else if errors.Is(x.Err, sandbox.ErrExecTimeout) {
			code, msg = chat.ErrTimeout, fmt.Sprintf("%s ran longer than its timeout (%s) and was stopped", cli, x.spec.Timeout)
		}
		err = &chat.Error{Code: code, Message: msg, Err: withStderr(tail, x.Err)}
	case !p.GotResult:
		msg := fmt.Sprintf("%s exited with code %d without a result", cli, x.Code)
		if x.ParseErr != nil {
			msg += " (" + x.ParseErr.Error() + ")"
		}
		code := chat.ErrExecutor
		if p.NoResult != nil {
			var note string
			if code, note = p.NoResult(tail); note != "" {
				msg += "; " + note
			}
		}
		if tail != "" {
			msg += ": " + LastLine(tail)
		}
		err = &chat.Error{Code: code, Message: msg, Err: withStderr(tail, nil)}
	case x.Code != 0 && !afterAnswer:
		msg := fmt.Sprintf("%s exited with code %d after its result", cli, x.Code)
		if tail != "" {
			msg += ": " + LastLine(tail)
		}
		err = &chat.Error{Code: chat.ErrExecutor, Message: msg, Err: withStderr(tail, nil)}
	default:
		return nil
	}
	chat.ErrorEvent(x.spec.Emit, x.spec.ErrorID, err.Code, err.Message)
	return err
}

// withStderr adds a stderr tail to the causes of a failure (none when the
// tail is empty).
func withStderr(tail string, cause error) error {
	if tail == "" {
		return cause
	}
	return &executor.Stderr{Tail: tail, Err: cause}
}

// Rule gives an error message its chat error code when it holds one of
// Any (and, when And is set, one of And too), in lower case.
type Rule struct {
	Code     string
	Any, And []string
}

// Rules classify a CLI's error message by its words (CLIs report no
// status codes on stderr): the first rule that matches gives the code,
// chat.ErrExecutor when none does.
type Rules []Rule

// Classify returns msg's code.
func (rs Rules) Classify(msg string) string {
	m := strings.ToLower(msg)
	has := func(words []string) bool {
		for _, w := range words {
			if strings.Contains(m, w) {
				return true
			}
		}
		return false
	}
	for _, r := range rs {
		if has(r.Any) && (r.And == nil || has(r.And)) {
			return r.Code
		}
	}
	return chat.ErrExecutor
}

// CLIRules are the words of the CLIs' error messages Classify reads.
var CLIRules = Rules{
	{Code: chat.ErrAuth, Any: []string{"unauthorized", "unauthenticated", "authentication", "invalid api key", "api key not valid",
		"permission denied", " 401", " 403", "status 401", "status 403"}},
	{Code: chat.ErrRateLimit, Any: []string{"rate limit", "rate_limit", "too many requests", "quota", " 429", "status 429"}},
	{Code: chat.ErrNetwork, Any: []string{"enotfound", "econnrefused", "econnreset", "etimedout", "network error", "could not connect",
		"connection refused", "unable to connect", "error sending request", "stream disconnected"}},
	{Code: chat.ErrMaxTurns, Any: []string{"max turns", "max_turns", "max session turns", "maximum session turns", "maximum number of turns", "step limit"}},
	{Code: chat.ErrInvalidRequest, Any: []string{"model"}, And: []string{"not found", "not available", "unknown", "invalid"}},
	{Code: chat.ErrUpstream, Any: []string{" 500", " 502", " 503", " 504", "internal server error", "overloaded", "status 5"}},
}

// Classify gives a CLI's error message its chat error code by its words
// (CLIRules).
func Classify(msg string) string { return CLIRules.Classify(msg) }

// StatusCode is the chat error code of a model API failure with HTTP
// status (0: unknown, the message decides).
func StatusCode(status int, msg string) string {
	switch {
	case status == 401 || status == 403:
		return chat.ErrAuth
	case status == 429:
		return chat.ErrRateLimit
	case status == 400 || status == 404 || status == 413:
		return chat.ErrInvalidRequest
	case status >= 500:
		return chat.ErrUpstream
	}
	return Classify(msg)
}

// Invalid is the error a Prepare returns for a request the CLI cannot
// honour.
func Invalid(format string, args ...any) error {
	return &chat.Error{Code: chat.ErrInvalidRequest, Message: fmt.Sprintf(format, args...)}
}
