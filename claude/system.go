package claude

import (
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/tidwall/gjson"

	"github.com/agentbox/agentbox/chat"
	"github.com/agentbox/agentbox/executor/agentcli"
)

// This file handles what the CLI reports about itself: system messages,
// its tasks (subagents, background commands), tool progress and rate
// limits.

// task is a task the CLI started and has not ended.
type task struct {
	id, desc string
	msg      string // its loading message
	seq      int
}

func (p *Parser) system(line string) {
	sub := gjson.Get(line, "subtype").Str
	switch sub {
	case "init":
		p.init(line)
	case "api_retry":
		p.apiRetry(line)
	case "permission_denied":
		r := gjson.GetMany(line, "tool_name", "tool_use_id", "message", "decision_reason")
		p.denial(agentcli.String(r[0]), agentcli.String(r[1]), cmpOr(agentcli.String(r[2]), agentcli.String(r[3])))
	case "task_started":
		p.taskStarted(line)
	case "task_progress":
		p.taskProgress(line)
	case "task_updated":
		r := gjson.GetMany(line, "task_id", "patch.status", "patch.error")
		switch r[1].Str {
		case "completed", "failed", "killed":
			p.taskEnded(r[0].Str, r[1].Str, r[2].Str)
		}
	case "task_notification":
		r := gjson.GetMany(line, "task_id", "status", "summary")
		p.taskEnded(r[0].Str, r[1].Str, r[2].Str)
	case "status":
		p.status(line)
	case "compact_boundary":
		r := gjson.GetMany(line, "compact_metadata.trigger", "compact_metadata.pre_tokens", "compact_metadata.post_tokens")
		msg := fmt.Sprintf("the conversation was compacted (%s) from %d tokens", cmpOr(r[0].Str, "auto"), r[1].Int())
		if r[2].Exists() {
			msg += fmt.Sprintf(" to %d", r[2].Int())
		}
		p.ev.Notice(NoticeCompacted, msg, map[string]any{"pre_tokens": r[1].Int(), "post_tokens": r[2].Int()})
	case "model_refusal_fallback", "model_refusal_no_fallback":
		r := gjson.GetMany(line, "content", "original_model", "fallback_model", "api_refusal_explanation")
		msg := "the model refused: " + cmpOr(agentcli.String(r[3]), agentcli.String(r[0]))
		props := map[string]any{"model": agentcli.String(r[1])}
		if f := agentcli.String(r[2]); f != "" {
			msg += "; the CLI switched to " + f
			props["fallback_model"] = f
		}
		p.ev.Notice(NoticeModelRefusal, msg, props)
	case "local_command_output":
		if t := agentcli.String(gjson.Get(line, "content")); t != "" {
			p.addAnswer(t)
			chat.Whole(p.emit, p.ev.NewID(), chat.TypeText, t, nil)
		}
	case "hook_response":
		r := gjson.GetMany(line, "outcome", "hook_name", "hook_event", "stderr")
		if r[0].Str == "error" {
			p.ev.Notice(NoticeHookFailed, fmt.Sprintf("hook %s (%s) failed: %s", r[1].Str, r[2].Str, agentcli.LastLine(r[3].Str)), nil)
		}
	case "plugin_install":
		r := gjson.GetMany(line, "status", "name", "error")
		if r[0].Str == "failed" {
			p.ev.Notice(NoticePluginInstallFailed, fmt.Sprintf("plugin %s was not installed: %s", r[1].Str, r[2].Str), nil)
		}
	case "session_state_changed":
		if gjson.Get(line, "state").Str == "requires_action" {
			p.ev.Notice(NoticeRequiresAction, "the CLI is waiting for an answer nobody can give in the sandbox (a permission prompt or a question)", nil)
		}
	case "worker_shutting_down":
		p.ev.Notice(NoticeShuttingDown, "the CLI is shutting down: "+agentcli.String(gjson.Get(line, "reason")), nil)
	case "notification":
		r := gjson.GetMany(line, "text", "priority")
		p.ev.Notice(NoticeNotification, agentcli.String(r[0]), map[string]any{"priority": r[1].Str})
	case "informational":
		r := gjson.GetMany(line, "content", "level")
		if r[1].Str == "warning" || r[1].Str == "notice" {
			p.ev.Notice(NoticeWarning, agentcli.String(r[0]), map[string]any{"level": r[1].Str})
		}
	case "session_writes_lost":
		r := gjson.GetMany(line, "error_code", "lost")
		p.ev.Notice(NoticeSessionNotSaved, fmt.Sprintf("the CLI could not write its %s (%s); the next turn may not resume this one", strings.Join(agentcli.Strings(r[1]), " and "), r[0].Str), nil)
	case "control_request_progress", "hook_started", "hook_progress", "background_tasks_changed",
		"thinking_tokens", "commands_changed", "files_persisted", "memory_recall", "elicitation_complete", "mirror_error":
		// Dropped: see the package documentation.
	default:
		p.out.Unknown++
	}
}

// init handles the CLI's init message: the first of a run is the session
// event; a later one starts a follow-up turn of the same session.
func (p *Parser) init(line string) {
	if p.out.Timings.Init.IsZero() {
		p.out.Timings.Init = time.Now()
	}
	if p.sessionSent {
		if p.out.GotResult {
			p.workAfter = true
		}
		return
	}
	p.sessionSent = true
	r := gjson.GetMany(line, "session_id", "model", "tools", "mcp_servers", "skills", "cwd", "permissionMode", "claude_code_version")
	p.out.SessionID = agentcli.String(r[0])
	p.out.Model = agentcli.String(r[1])
	servers := agentcli.ServerStatuses(r[3])
	skillNames := agentcli.Strings(r[4])
	p.ev.Session(agentcli.Session{
		ID: p.out.SessionID, Model: p.out.Model, Cwd: agentcli.String(r[5]),
		Tools: agentcli.Strings(r[2]), Skills: skillNames, MCPServers: servers,
		PermissionMode: agentcli.String(r[6]), Version: agentcli.String(r[7]),
	})
	for _, s := range servers {
		switch s.Status {
		case "connected", "pending":
			continue
		}
		p.ev.MCPFailed(s.Name, s.Status)
	}
	for _, s := range p.opts.Skills {
		if !slices.Contains(skillNames, s) {
			p.ev.Notice(NoticeSkillMissing,
				fmt.Sprintf("skill %q was not loaded by the CLI", s),
				map[string]any{"skill": s})
		}
	}
}

func (p *Parser) denial(tool, id, reason string) {
	if id != "" {
		if p.denied[id] {
			return
		}
		p.denied[id] = true
	}
	msg := fmt.Sprintf("permission denied for tool %s", tool)
	if reason != "" {
		msg += ": " + reason
	}
	p.ev.Denied(chat.Denial{Tool: tool, ToolUseID: id}, msg, nil)
}

// status handles the CLI's status changes: a compaction is a loading
// message while it runs.
func (p *Parser) status(line string) {
	r := gjson.GetMany(line, "status", "compact_result", "compact_error")
	if r[0].Str == "compacting" {
		if p.compacting == "" {
			p.compacting = p.ev.NewID()
			msg := "Compacting the conversation"
			p.emit(chat.Event{Event: chat.Start, ID: p.compacting, Type: chat.TypeLoading, Text: msg, Props: map[string]any{"message": msg}})
		}
		return
	}
	if p.compacting != "" {
		p.endLoading(p.compacting, nil)
		p.compacting = ""
	}
	if r[1].Str == "failed" {
		p.ev.Notice(NoticeCompactFailed, "compacting the conversation failed: "+cmpOr(agentcli.String(r[2]), "no reason given"), nil)
	}
}

// taskStarted opens a loading message for a task; the turn waits for it.
func (p *Parser) taskStarted(line string) {
	r := gjson.GetMany(line, "task_id", "tool_use_id", "description", "task_type", "subagent_type", "is_backgrounded")
	id := agentcli.String(r[0])
	if id == "" || p.tasks[id] != nil {
		return
	}
	t := &task{id: id, desc: agentcli.String(r[2]), msg: p.ev.NewID(), seq: p.ev.Seq()}
	p.tasks[id] = t
	p.out.Tasks++
	if p.out.GotResult {
		p.workAfter = true
	}
	kind := cmpOr(r[4].Str, r[3].Str)
	// A task runs in the background unless the CLI says it blocks its
	// tool call (is_backgrounded false: a long foreground command); CLIs
	// before 2.1.3xx registered only background tasks and leave it out.
	background := !r[5].Exists() || r[5].Bool()
	text := fmt.Sprintf("%s: %s", taskLabel(r[3].Str, kind, background), t.desc)
	props := map[string]any{"message": text, "task_id": id, "tool_use_id": agentcli.String(r[1]),
		"task_type": agentcli.String(r[3]), "background": background}
	p.emit(chat.Event{Event: chat.Start, ID: t.msg, Type: chat.TypeLoading, Text: text, Props: props})
}

// taskLabel names a kind of task for people.
func taskLabel(taskType, kind string, background bool) string {
	switch taskType {
	case "local_bash":
		if !background {
			return "Command"
		}
		return "Background command"
	case "local_agent", "remote_agent":
		return "Subagent (" + kind + ")"
	}
	return "Task (" + cmpOr(kind, "unknown") + ")"
}

// taskProgress replaces a task's loading message with its progress.
func (p *Parser) taskProgress(line string) {
	r := gjson.GetMany(line, "task_id", "description", "summary", "last_tool_name", "usage.tool_uses", "usage.total_tokens")
	t := p.tasks[r[0].Str]
	if t == nil {
		return
	}
	text := cmpOr(agentcli.String(r[1]), t.desc)
	if s := cmpOr(agentcli.String(r[2]), agentcli.String(r[3])); s != "" {
		text += " — " + s
	}
	text += fmt.Sprintf(" (%d tool uses, %d tokens)", r[4].Int(), r[5].Int())
	p.emit(chat.Event{Event: chat.Replace, ID: t.msg, Type: chat.TypeLoading, Text: text,
		Props: map[string]any{"message": text, "task_id": t.id, "tool_uses": r[4].Int(), "tokens": r[5].Int()}})
}

// taskEnded ends a task's loading message; a failed or stopped task is a
// notice. The CLI runs a follow-up turn for a task that ended after its
// answer.
func (p *Parser) taskEnded(id, status, summary string) {
	t := p.tasks[id]
	if t == nil {
		return
	}
	delete(p.tasks, id)
	if p.out.GotResult {
		p.workAfter = true
	}
	p.endLoading(t.msg, map[string]any{"status": status})
	switch status {
	case "failed":
		p.ev.Notice(NoticeTaskFailed, fmt.Sprintf("task %q failed: %s", t.desc, cmpOr(summary, "no reason given")), map[string]any{"task_id": id})
	case "stopped", "killed":
		p.ev.Notice(NoticeTaskStopped, fmt.Sprintf("task %q was stopped before it finished", t.desc), map[string]any{"task_id": id})
	}
}

func (p *Parser) sortedTasks() []*task {
	out := make([]*task, 0, len(p.tasks))
	for _, t := range p.tasks {
		out = append(out, t)
	}
	slices.SortFunc(out, func(a, b *task) int { return a.seq - b.seq })
	return out
}

// toolProgress shows how long a tool has been running, in one loading
// message per tool call, ended by its result.
func (p *Parser) toolProgress(line string) {
	r := gjson.GetMany(line, "tool_use_id", "tool_name", "elapsed_time_seconds", "parent_tool_use_id")
	id := agentcli.String(r[0])
	if id == "" {
		return
	}
	text := fmt.Sprintf("%s running for %ds", cmpOr(r[1].Str, "a tool"), r[2].Int())
	props := map[string]any{"message": text, "tool_use_id": id, "name": agentcli.String(r[1]), "elapsed_seconds": r[2].Int()}
	if r[3].Str != "" {
		props["parent_tool_use_id"] = agentcli.String(r[3])
	}
	if msg, ok := p.progress[id]; ok {
		p.emit(chat.Event{Event: chat.Replace, ID: msg, Type: chat.TypeLoading, Text: text, Props: props})
		return
	}
	msg := p.ev.NewID()
	p.progress[id] = msg
	p.emit(chat.Event{Event: chat.Start, ID: msg, Type: chat.TypeLoading, Text: text, Props: props})
}

// rateLimit reports the account's rate limit when it is not plainly
// allowed.
func (p *Parser) rateLimit(line string) {
	r := gjson.GetMany(line, "rate_limit_info.status", "rate_limit_info.rateLimitType", "rate_limit_info.resetsAt", "rate_limit_info.utilization")
	if r[0].Str == "" || r[0].Str == "allowed" {
		return
	}
	msg := fmt.Sprintf("rate limit %s (%s)", strings.ReplaceAll(r[0].Str, "_", " "), cmpOr(r[1].Str, "unknown window"))
	p.ev.Notice(NoticeRateLimit, msg, map[string]any{"status": r[0].Str, "limit": r[1].Str, "resets_at": r[2].Int(), "utilization": r[3].Float()})
}
