package pipeline

import (
	"context"
	"encoding/json"
	"errors"
	"slices"
	"strings"
	"time"

	"github.com/agentbox/agentbox/assistant"
	"github.com/agentbox/agentbox/chat"
	"github.com/agentbox/agentbox/skills"
	"github.com/agentbox/agentbox/store"
)

// skillTrial makes a turn the test of a skill proposal: a short turn of
// the proposal's assistant in a throwaway chat (a fresh workspace and
// sandbox, made as for any turn of the assistant) with the proposal
// installed beside the assistant's skills and the user's approved ones.
// It is the turn the skill will run in once approved: the assistant's
// Create and Next hooks run and its host tools are offered (not
// propose_skill: a test proposes nothing). Hooks tell it from other turns
// by ctx.metadata.skill_test (the proposal's id and the skill's name), so
// one that reaches other systems or keeps user memory can hold back; the
// throwaway chat's own memory (ctx.memory.chat) and workspace are removed
// after it. It stores no history and claims no chat; its usage is
// recorded as the user's.
type skillTrial struct {
	skill    *skills.Skill
	maxTurns int
	timeout  time.Duration
}

// SkillTestMetadata is the key of the request metadata that marks a
// skill's test turn for its hooks (ctx.metadata.skill_test): an object
// with the proposal's id and the skill's name.
const SkillTestMetadata = "skill_test"

// testGrace is what a test turn may take beyond its timeout (sandbox
// start and removal); a test still "running" after that is taken for one
// whose server stopped.
const testGrace = 2 * time.Minute

// maxTestAnswer bounds the answer a test outcome keeps.
const maxTestAnswer = 8 << 10

// testBounds returns the bounds of a's skill tests: package.yao's
// skills.test, held under the sandbox timeout.
func testBounds(a *assistant.Assistant) (maxTurns int, timeout time.Duration) {
	maxTurns, timeout = assistant.DefaultSkillTestMaxTurns, assistant.DefaultSkillTestTimeout
	if sa := a.SkillAuthoring; sa != nil {
		maxTurns, timeout = sa.TestMaxTurns, sa.TestTimeout
	}
	if a.Sandbox != nil && a.Sandbox.Timeout > 0 {
		timeout = min(timeout, a.Sandbox.Timeout)
	}
	return maxTurns, timeout
}

// startTest starts a test turn of proposal sp with prompt in the
// background and returns its running test. The proposal's assistant must
// still exist with a sandbox; a test of it must not be running
// (ErrSkillConflict).
func (p *Pipeline) startTest(ctx context.Context, sp *SkillProposal, prompt string) (*SkillTest, error) {
	a, ok := p.App().Assistants[sp.AssistantID]
	if !ok || a.Sandbox == nil {
		return nil, chat.Errorf(chat.ErrSkillConflict, "assistant %q, which proposal %s is for, is no longer a sandboxed assistant of this app: the skill cannot be tested", sp.AssistantID, sp.ID)
	}
	skill, probs := sp.Draft.Build()
	if len(probs) > 0 {
		return nil, chat.Errorf(chat.ErrSkillConflict, "proposal %s is no longer a valid skill: %v", sp.ID, probs[0])
	}
	maxTurns, timeout := testBounds(a)
	now := time.Now()
	test := &SkillTest{Status: store.TestRunning, Prompt: prompt, ChatID: "skill-test-" + sp.ID + "-" + newProposalID()[4:12], StartedAt: now}
	if err := p.cfg.Skills.StartSkillTest(ctx, sp.UserID, sp.ID, test, now.Add(-timeout-testGrace)); err != nil {
		return nil, skillStoreError(err)
	}
	trial := &skillTrial{skill: skill, maxTurns: maxTurns, timeout: timeout}
	if !p.goBackground(func() { p.runTest(sp, test, trial) }) {
		test.Status, test.FinishedAt = store.TestFailed, time.Now()
		test.Error = &store.TestError{Code: chat.ErrShuttingDown, Message: "the server is shutting down; run the test again later"}
		p.finishTest(sp, test)
	}
	return test, nil
}

// goBackground runs fn in a goroutine that Close waits for, unless the
// pipeline is closed (then it returns false).
func (p *Pipeline) goBackground(fn func()) bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.closed {
		return false
	}
	p.wg.Go(fn)
	return true
}

// testProposals starts the tests of the proposals a turn made (once it
// ended, so they take no slot of its own).
func (p *Pipeline) testProposals(user string, list []proposedTest) {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	for _, pt := range list {
		sp, err := p.cfg.Skills.SkillProposal(ctx, user, pt.id)
		if err == nil {
			_, err = p.startTest(ctx, sp, pt.prompt)
		}
		if err != nil {
			p.log.Warn("skill test not started", "user", user, "proposal", pt.id, "error", err)
		}
	}
}

// runTest runs the test turn and records its outcome.
func (p *Pipeline) runTest(sp *SkillProposal, test *SkillTest, trial *skillTrial) {
	ctx, cancel := context.WithTimeout(context.Background(), trial.timeout+testGrace)
	defer cancel()
	rec := &trialRecorder{skill: sp.Name}
	req := &Request{UserID: sp.UserID, ChatID: test.ChatID, AssistantID: sp.AssistantID, Ephemeral: true,
		Messages: []chat.Message{{Role: chat.RoleUser, Content: test.Prompt}},
		Metadata: map[string]any{SkillTestMetadata: map[string]any{"proposal_id": sp.ID, "skill": sp.Name}}}
	resp, err := p.chat(ctx, req, rec.add, trial, false)
	rec.fill(test, resp, err)
	cctx := context.WithoutCancel(ctx)
	if err := p.removeWorkspace(cctx, sp.UserID, test.ChatID); err != nil {
		p.log.Warn("skill test workspace not removed", "user", sp.UserID, "chat", test.ChatID, "error", err)
	}
	if _, err := p.forgetChatMemory(cctx, sp.UserID, test.ChatID); err != nil {
		p.log.Warn("skill test chat memory not removed", "user", sp.UserID, "chat", test.ChatID, "error", err)
	}
	p.finishTest(sp, test)
	p.log.Info("skill tested", "user", sp.UserID, "proposal", sp.ID, "status", test.Status,
		"skill_loaded", test.SkillLoaded, "skill_used", test.SkillUsed)
}

func (p *Pipeline) finishTest(sp *SkillProposal, test *SkillTest) {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := p.cfg.Skills.FinishSkillTest(ctx, sp.UserID, sp.ID, test); err != nil && !errors.Is(err, store.ErrConflict) {
		p.log.Error("skill test outcome not stored", "user", sp.UserID, "proposal", sp.ID, "error", err)
	}
}

// removeWorkspace deletes a throwaway chat's workspace.
func (p *Pipeline) removeWorkspace(ctx context.Context, user, chatID string) error {
	if p.cfg.Workspaces == nil {
		return nil
	}
	return p.cfg.Workspaces.Remove(ctx, user, chatID)
}

// trialRecorder reads a test turn's events: its answer, tool calls,
// notices, and whether the skill was loaded and used.
type trialRecorder struct {
	skill   string
	text    chat.Collector
	session []string
	calls   []store.TestToolCall
	byMsg   map[string]int // tool_call message id -> calls index
	byTool  map[string]int // tool call id -> calls index
	used    bool
	notices []string
}

func (r *trialRecorder) add(e chat.Event) {
	r.text.Add(e)
	switch {
	case e.Type == chat.TypeSession && e.Event == chat.Start:
		r.session = stringList(e.Props["skills"])
	case e.Type == chat.TypeToolCall && e.Event == chat.Start:
		name, _ := e.Props["name"].(string)
		id, _ := e.Props["id"].(string)
		if r.byMsg == nil {
			r.byMsg, r.byTool = map[string]int{}, map[string]int{}
		}
		r.byMsg[e.ID], r.byTool[id] = len(r.calls), len(r.calls)
		r.calls = append(r.calls, store.TestToolCall{Name: name})
		r.checkUse(name, e.Props["input"])
	case e.Type == chat.TypeToolCall && e.Event == chat.End:
		// The input comes whole with the end of the message.
		if i, ok := r.byMsg[e.ID]; ok {
			r.checkUse(r.calls[i].Name, e.Props["input"])
		}
	case e.Type == chat.TypeToolResult && e.Event == chat.Start:
		id, _ := e.Props["tool_call_id"].(string)
		if i, ok := r.byTool[id]; ok && e.Props["is_error"] == true {
			r.calls[i].IsError = true
		}
	case e.Type == chat.TypeNotice && e.Event == chat.Start:
		if c, ok := e.Props["code"].(string); ok {
			r.notices = append(r.notices, c)
		}
	}
}

// checkUse notes a call that used the skill: Claude Code's Skill tool
// naming it, or any tool whose input names a file of it.
func (r *trialRecorder) checkUse(name string, input any) {
	if input == nil || r.used {
		return
	}
	var raw []byte
	switch v := input.(type) {
	case json.RawMessage:
		raw = v
	case string:
		raw = []byte(v)
	default:
		raw, _ = json.Marshal(v)
	}
	if name == "Skill" {
		var in struct {
			Skill, Command string
		}
		if json.Unmarshal(raw, &in) == nil && (in.Skill == r.skill || in.Command == r.skill) {
			r.used = true
			return
		}
	}
	r.used = strings.Contains(string(raw), "skills/"+r.skill+"/")
}

// fill completes test with what the turn showed.
func (r *trialRecorder) fill(test *SkillTest, resp *Response, err error) {
	test.FinishedAt = time.Now()
	test.Answer = r.text.Text()
	if resp != nil {
		test.Answer = resp.Content
		test.Usage = resp.Usage
	}
	if len(test.Answer) > maxTestAnswer {
		test.Answer = strings.ToValidUTF8(test.Answer[:maxTestAnswer], "") + "…"
	}
	test.ToolCalls = r.calls
	test.SessionSkills = r.session
	test.SkillLoaded = slices.Contains(r.session, r.skill)
	test.SkillUsed = r.used
	test.Notices = r.notices
	test.Status = store.TestCompleted
	if err != nil {
		ce := chat.AsError(err)
		test.Status = store.TestFailed
		test.Error = &store.TestError{Code: ce.Code, Message: ce.Message}
	}
}

// stringList reads a list of strings from an event prop.
func stringList(v any) []string {
	switch l := v.(type) {
	case []string:
		return slices.Clone(l)
	case []any:
		out := make([]string, 0, len(l))
		for _, e := range l {
			if s, ok := e.(string); ok {
				out = append(out, s)
			}
		}
		return out
	}
	return nil
}

// skillStoreError turns the skill store's errors into the pipeline's:
// what does not exist, a state that forbids the change.
func skillStoreError(err error) error {
	switch {
	case errors.Is(err, store.ErrNotFound):
		return &chat.Error{Code: chat.ErrInvalidRequest, Message: err.Error(), Err: err}
	case errors.Is(err, store.ErrConflict):
		return &chat.Error{Code: chat.ErrSkillConflict, Message: conflictMessage(err), Err: err}
	case errors.Is(err, store.ErrInvalid):
		return &chat.Error{Code: chat.ErrInvalidRequest, Message: err.Error(), Err: err}
	}
	return &chat.Error{Code: chat.ErrInternal, Message: "the skill store is unavailable", Err: err}
}

// conflictMessage rewords a store conflict for clients.
func conflictMessage(err error) string {
	s := err.Error()
	return strings.Replace(s, ": "+store.ErrConflict.Error()+":", ":", 1)
}
