package testrun

import (
	"context"
	"errors"
	"fmt"
	"os"
	"strings"
	"time"

	"github.com/agentbox/agentbox/jsapi"
)

// runScriptSuite runs a *_test.ts file's Test... functions one after the
// other, each in a runtime of its own, as Yao does.
func (r *runner) runScriptSuite(ctx context.Context, s *Suite) *Report {
	rep := newReport(s, r.opts, KindScript)
	rep.Summary.AgentID = s.Name
	tests := make([]string, 0, len(s.Tests))
	for _, t := range s.Tests {
		if r.opts.Filter == nil || r.opts.Filter.MatchString(t) {
			tests = append(tests, t)
		}
	}
	rep.Summary.Total = len(tests)
	r.emit(&Event{Type: EventStart, Suite: s.Name, Kind: KindScript, AgentID: s.Name, TotalCases: len(tests)})
	h, err := s.hooks, error(nil)
	if h == nil {
		h, err = r.scripts.load(s.File, s.Root, s.Assistant)
	}
	if err != nil {
		rep.Error = err.Error()
		for range tests {
			r.finished(StatusSkipped)
		}
	} else {
		for _, name := range tests {
			if ctx.Err() != nil || r.stopped() {
				break
			}
			res := r.runScriptTest(ctx, s, h, name)
			rep.Results = append(rep.Results, res)
		}
	}
	rep.Metadata.CompletedAt = time.Now()
	rep.Summary.DurationMs = rep.Metadata.CompletedAt.Sub(rep.Metadata.StartedAt).Milliseconds()
	rep.summarize()
	r.emit(&Event{Type: EventSummary, Suite: s.Name, Kind: KindScript, Summary: rep.Summary, Message: rep.Error})
	return rep
}

// runScriptTest runs one Test... function with Yao's t and a test ctx.
func (r *runner) runScriptTest(ctx context.Context, s *Suite, h *jsapi.Hooks, name string) *Result {
	res := &Result{ID: name, Input: name, ChatID: fmt.Sprintf("test-%s-%s", r.opts.RunID, safeID(name))}
	r.emit(&Event{Type: EventCaseStart, Suite: s.Name, Kind: KindScript, ID: name})
	start := time.Now()
	// The test's deadline, whatever timeout its file was compiled with.
	ctx, cancel := context.WithTimeout(ctx, r.opts.Timeout)
	defer cancel()
	env, err := r.env(ctx, s.Assistant, res.ChatID)
	if err != nil {
		res.Status, res.Error = StatusError, err.Error()
	} else {
		t := &jsapi.TestingT{Name: name, Log: env.logs.add}
		t.Judge = func(ctx context.Context, response any, agentID string, o map[string]any) (bool, string) {
			opts := &AssertionOptions{}
			opts.Connector, _ = o["connector"].(string)
			opts.Metadata, _ = o["metadata"].(map[string]any)
			v, err := r.judge(ctx, agentID, response, nil, o["criteria"], opts, &res.Usage)
			if err != nil {
				return false, err.Error()
			}
			return v.Passed, v.Reason
		}
		yao, err := h.RunTest(ctx, env.hc, name, t, env.x)
		res.Logs = env.logs.all()
		r.scriptStatus(res, t, yao, err)
		if env.lazy != nil {
			if opened, oerr := env.lazy.state(); oerr != nil {
				res.Notes = append(res.Notes, oerr.Error())
			} else if opened {
				res.Notes = append(res.Notes, "ran with the assistant's sandbox")
			}
		}
		if cerr := env.close(); cerr != nil {
			res.Notes = append(res.Notes, "sandbox not removed: "+cerr.Error())
		}
		if env.lazy != nil {
			r.keepOrDelete(ctx, s, res)
		} else {
			res.ChatID = ""
		}
	}
	res.DurationMs = time.Since(start).Milliseconds()
	r.finished(res.Status)
	r.emit(&Event{Type: EventResult, Suite: s.Name, Kind: KindScript, ID: name, Result: res})
	return res
}

// scriptStatus decides a script test's status: a test that used one of
// Yao's globals and did not pass is skipped with a YAO_ONLY reason; then
// a throw is an error, t.skip a skip, a failed assertion a failure.
func (r *runner) scriptStatus(res *Result, t *jsapi.TestingT, yao []string, err error) {
	var je *jsapi.Error
	isJS := errors.As(err, &je)
	if isJS {
		res.StackTrace = je.Stack
	}
	skipped, reason := t.Skipped()
	errs := t.Errors()
	if a := t.FirstAssertion(); a != nil {
		res.Assertion = &ScriptAssertionInfo{Type: a.Type, Expected: a.Expected, Actual: a.Actual, Message: a.Message}
	}
	switch {
	case isJS && je.Code == jsapi.CodeYaoOnly:
		res.Status, res.Error = StatusSkipped, yaoOnlyReason(yao)
		if je.File != "" {
			res.Error += fmt.Sprintf(" (%s:%d:%d)", je.File, je.Line, je.Column)
		}
	case len(yao) > 0 && (err != nil || t.Failed()):
		// The test caught the YAO_ONLY error and failed later, most likely
		// for the want of what the Yao global would have given it.
		res.Status = StatusSkipped
		why := strings.Join(errs, "; ")
		if err != nil {
			why = err.Error()
		}
		res.Error = yaoOnlyReason(yao) + "; the test then failed: " + why
	case err != nil && isJS && je.Code == jsapi.CodeHookTimeout:
		res.Status, res.Error = StatusTimeout, fmt.Sprintf("timeout after %s", r.opts.Timeout)
	case err != nil:
		res.Status, res.Error = StatusError, err.Error()
		if isJS {
			res.Error = je.Name + ": " + je.Message
			if je.File != "" {
				res.Error += fmt.Sprintf(" (%s:%d:%d)", je.File, je.Line, je.Column)
			}
		}
	case skipped:
		res.Status, res.Error = StatusSkipped, reason
	case t.Failed():
		res.Status = StatusFailed
		res.Error = strings.Join(errs, "; ")
	default:
		res.Status = StatusPassed
	}
}

// ScriptSuite builds the suite of a *_test.ts file: file is absolute,
// under root (the assistant's folder, or the app's for scripts/), owner
// the assistant ("" for scripts/). The file is compiled to find its
// tests; a file that does not compile is an error naming file:line:col.
func ScriptSuite(name, file, root, owner string, timeout time.Duration) (*Suite, error) {
	src, err := os.ReadFile(file)
	if err != nil {
		return nil, fmt.Errorf("script test %s: %w", name, err)
	}
	if timeout <= 0 {
		timeout = DefaultTimeout
	}
	h, err := newScripts(nil, timeout).load(file, root, owner)
	if err != nil {
		return nil, err
	}
	tests := TestFunctions(h, src)
	return &Suite{Kind: KindScript, Name: name, Assistant: owner, File: file, Root: root, Tests: tests, hooks: h}, nil
}
