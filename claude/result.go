package claude

import (
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/tidwall/gjson"

	"github.com/agentbox/agentbox/chat"
	"github.com/agentbox/agentbox/executor/agentcli"
)

// usageSum adds up the usage of a run's results. Claude Code reports it in
// two ways:
//   - 2.1.330 (and later) resumes a session's totals: total_cost_usd and
//     modelUsage cover every turn of the session so far, and
//     model_usage_since_last_result the run's share since its previous
//     result. The run's usage is the sum of the latter over its results.
//   - 2.1.197 starts from zero in each process: the last result's
//     modelUsage (or usage and total_cost_usd) is the run's.
//
// modelUsage counts subagents too, which the result's usage does not.
type usageSum struct {
	sinceLast bool       // a result had model_usage_since_last_result
	sum       chat.Usage // the sum of model_usage_since_last_result
	last      chat.Usage // the latest result's process totals
	turns     int
	duration  int64
}

// add takes a result's figures.
func (u *usageSum) add(r gjson.Result) {
	f := gjson.GetMany(r.Raw, "model_usage_since_last_result", "modelUsage", "usage", "total_cost_usd", "num_turns", "duration_ms")
	if f[0].IsObject() {
		u.sinceLast = true
		u.sum.Add(modelUsage(f[0]))
	}
	if m := f[1]; m.IsObject() && len(m.Map()) > 0 {
		u.last = modelUsage(m)
	} else {
		u.last = chat.Usage{
			InputTokens:         f[2].Get("input_tokens").Int(),
			OutputTokens:        f[2].Get("output_tokens").Int(),
			CacheReadTokens:     f[2].Get("cache_read_input_tokens").Int(),
			CacheCreationTokens: f[2].Get("cache_creation_input_tokens").Int(),
			CostUSD:             f[3].Float(),
		}
	}
	u.turns += int(f[4].Int())
	u.duration += f[5].Int()
}

// total is the run's usage.
func (u *usageSum) total() chat.Usage {
	t := u.last
	if u.sinceLast {
		t = u.sum
	}
	t.Turns, t.DurationMS = u.turns, u.duration
	return t
}

// modelUsage sums a per-model usage object ({model: {inputTokens, ...}}).
func modelUsage(m gjson.Result) chat.Usage {
	var u chat.Usage
	m.ForEach(func(_, v gjson.Result) bool {
		f := gjson.GetMany(v.Raw, "inputTokens", "outputTokens", "cacheReadInputTokens", "cacheCreationInputTokens", "costUSD")
		u.InputTokens += f[0].Int()
		u.OutputTokens += f[1].Int()
		u.CacheReadTokens += f[2].Int()
		u.CacheCreationTokens += f[3].Int()
		u.CostUSD += f[4].Float()
		return true
	})
	return u
}

// result handles a result: the end of a turn of the agent loop. A run has
// one, and one more for each follow-up turn the CLI runs when background
// work ends.
func (p *Parser) result(line string) {
	// Text still unconfirmed was a stream cut short.
	p.discard("the turn ended")
	r := gjson.Parse(line)
	f := gjson.GetMany(line, "subtype", "is_error", "session_id", "result", "errors", "permission_denials", "api_error_status")
	first := !p.out.GotResult
	p.out.GotResult = true
	p.out.Results++
	p.workAfter = false
	p.out.Subtype = agentcli.String(f[0])
	if s := agentcli.String(f[2]); s != "" {
		p.out.SessionID = s
	}
	p.usage.add(r)
	if st := int(f[6].Int()); st != 0 {
		p.out.APIErrorStatus = st
	}
	f[5].ForEach(func(_, d gjson.Result) bool {
		p.denial(agentcli.String(d.Get("tool_name")), agentcli.String(d.Get("tool_use_id")), "")
		return true
	})
	text := agentcli.String(f[3])
	failed := f[1].Bool() || strings.HasPrefix(p.out.Subtype, "error")
	if failed && p.interrupted && p.out.Subtype == "error_during_execution" {
		// Its user interrupted the turn: the answer is what was said.
		p.interrupted, failed = false, false
		p.ev.Notice(NoticeInterrupted, "the turn was interrupted by its user", nil)
	}
	if !failed {
		p.answered = true
		if p.answer.Len() == 0 && text != "" {
			// Nothing streamed (an old CLI, partial messages off): the
			// result text is the answer.
			chat.Whole(p.emit, p.ev.NewID(), chat.TypeText, text, nil)
			p.addAnswer(text)
		}
		p.apiErr = nil
		p.mon.Answered()
		return
	}
	var msgs []string
	f[4].ForEach(func(_, v gjson.Result) bool { msgs = append(msgs, v.String()); return true })
	msg := strings.Join(msgs, "; ")
	kind := ""
	if e := p.apiErr; e != nil {
		msg = cmpOr(msg, e.message)
		kind = e.kind
	}
	msg = cmpOr(msg, text)
	if msg == "" {
		msg = "the CLI reported " + p.out.Subtype
	}
	code := errorCode(p.out.Subtype, p.out.APIErrorStatus, kind)
	p.apiErr = nil
	if !first && p.answered {
		// A follow-up turn the CLI ran on its own failed: the answer
		// stands.
		p.ev.Notice(NoticeFollowUpFailed, "a follow-up turn after background work failed: "+msg, map[string]any{"error": code})
		return
	}
	p.fail(code, msg)
}

// fail records the turn's failure and emits its error event.
func (p *Parser) fail(code, msg string) {
	msg = strings.Clone(msg)
	p.out.Err = &chat.Error{Code: code, Message: msg}
	chat.ErrorEvent(p.emit, p.ev.NewID(), code, msg)
}

// apiRetry reports a retry of a failed model API call as a loading
// message, and stops the CLI when it would wait longer than the turn
// accepts or retry more often: the model's error then surfaces at once.
func (p *Parser) apiRetry(line string) {
	r := gjson.GetMany(line, "attempt", "max_retries", "error_status", "error", "retry_delay_ms")
	// A stream cut short is retried: what it showed is not the answer.
	p.discard("the model API call failed")
	status := int(r[2].Int())
	if status != 0 {
		p.out.APIErrorStatus = status
	}
	kind := r[3].String()
	delay := time.Duration(r[4].Float() * float64(time.Millisecond))
	msg := fmt.Sprintf("model API call failed (%s), retrying in %s (attempt %d of %d)",
		describeAPIError(status, kind), delay.Round(100*time.Millisecond), r[0].Int(), r[1].Int())
	chat.Whole(p.emit, p.ev.NewID(), chat.TypeLoading, msg, map[string]any{
		"message": msg, "code": NoticeAPIRetry, "attempt": r[0].Int(), "status": status})
	tooLong := p.opts.MaxRetryWait > 0 && delay > p.opts.MaxRetryWait
	tooMany := p.opts.MaxAPIRetries > 0 && int(r[0].Int()) > p.opts.MaxAPIRetries
	if p.out.Err != nil || (!tooLong && !tooMany) {
		return
	}
	why := fmt.Sprintf("the CLI would wait %s before retrying", delay.Round(time.Second))
	if tooMany {
		why = fmt.Sprintf("it failed %d times", r[0].Int())
	}
	p.fail(errorCode("", status, kind), fmt.Sprintf("the model API failed (%s) and %s; the turn stopped", describeAPIError(status, kind), why))
	p.mon.Stop()
}

func describeAPIError(status int, kind string) string {
	switch {
	case status != 0 && kind != "":
		return strconv.Itoa(status) + " " + kind
	case status != 0:
		return "HTTP " + strconv.Itoa(status)
	case kind != "":
		return kind
	}
	return "unknown error"
}

// errorCode maps a failed result to a chat error code: by its subtype,
// else by the model API's status, else by the kind of API error the CLI
// named (SDKAssistantMessageError).
func errorCode(subtype string, status int, kind string) string {
	switch subtype {
	case "error_max_turns":
		return chat.ErrMaxTurns
	}
	switch {
	case status == 401 || status == 403:
		return chat.ErrAuth
	case status == 429:
		return chat.ErrRateLimit
	case status == 400 || status == 404 || status == 413 || status == 422:
		return chat.ErrInvalidRequest
	case status >= 500:
		return chat.ErrUpstream
	}
	switch kind {
	case "authentication_failed", "oauth_org_not_allowed", "billing_error", "account_on_hold", "cloud_credential_error":
		return chat.ErrAuth
	case "rate_limit":
		return chat.ErrRateLimit
	case "overloaded", "server_error", "unknown":
		return chat.ErrUpstream
	case "invalid_request", "model_not_found", "max_output_tokens":
		return chat.ErrInvalidRequest
	}
	return chat.ErrExecutor
}
