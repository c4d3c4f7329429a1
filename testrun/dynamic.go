package testrun

import (
	"context"
	"encoding/json"
	"fmt"
	"sort"
	"strings"

	"github.com/agentbox/agentbox/chat"
)

// simulatorInput is what the simulator assistant is told each turn (Yao's
// SimulatorInput), as JSON in its user message.
type simulatorInput struct {
	Persona            string         `json:"persona,omitempty"`
	Goal               string         `json:"goal,omitempty"`
	Conversation       []chat.Message `json:"conversation"`
	TurnNumber         int            `json:"turn_number"`
	MaxTurns           int            `json:"max_turns"`
	CheckpointsReached []string       `json:"checkpoints_reached,omitempty"`
	CheckpointsPending []string       `json:"checkpoints_pending,omitempty"`
	Extra              map[string]any `json:"extra,omitempty"`
}

// simulatorOutput is what it answers: the user's next message, or that
// the goal is achieved.
type simulatorOutput struct {
	Message      string
	GoalAchieved bool
	Reasoning    string
}

// runDynamic runs a case whose user is played by a simulator assistant:
// each turn the assistant answers, the checkpoints are checked against the
// answer, and the simulator writes the next user message, until every
// required checkpoint is reached (passed), the simulator says the goal is
// achieved (passed if the required checkpoints were reached), or the
// case runs out of turns (failed). Turns after the first continue the
// chat's stored history, as a user's next message does.
func (r *runner) runDynamic(ctx context.Context, s *Suite, c *Case, res *Result) {
	simID := c.Simulator.Use
	if simID == "" {
		simID = r.opts.Simulator
	}
	simConn := ""
	meta := map[string]any{}
	if o := c.Simulator.Options; o != nil {
		simConn = o.Connector
		for k, v := range o.Metadata {
			meta[k] = v
		}
	}
	cps := map[string]*CheckpointResult{}
	for _, cp := range c.Checkpoints {
		cps[cp.ID] = &CheckpointResult{ID: cp.ID, Required: cp.IsRequired(), Description: cp.Description}
	}
	res.Checkpoints = cps
	var conversation []chat.Message
	var pending []chat.Message
	if c.msgs != nil {
		pending = append(pending, c.msgs.messages...)
	}
	maxTurns := c.maxTurns()
	ck := &appChecker{r: r, s: s, c: c, res: res}
	defer func() {
		res.Metadata = map[string]any{"mode": "dynamic", "total_turns": len(res.Turns), "turns": res.Turns, "checkpoints": cps}
		if n := len(res.Turns); n > 0 {
			res.Output = res.Turns[n-1].Output
		}
	}()
	for turn := 1; turn <= maxTurns; turn++ {
		if ctx.Err() != nil {
			return // the caller reports the timeout
		}
		var input any
		if turn > 1 || len(pending) == 0 {
			sim, err := r.simulate(ctx, simID, simConn, c, conversation, cps, turn, maxTurns, meta, &res.Usage)
			if err != nil {
				res.Status, res.Error = StatusError, fmt.Sprintf("simulator error at turn %d: %v", turn, err)
				return
			}
			if sim.GoalAchieved {
				if missing := missingRequired(c, cps); len(missing) > 0 {
					res.Status = StatusFailed
					res.Error = "the simulator says the goal is achieved, but required checkpoints were not reached: " + strings.Join(missing, ", ")
				} else {
					res.Status = StatusPassed
				}
				return
			}
			pending = append(pending, chat.Message{Role: chat.RoleUser, Content: sim.Message})
			input = sim.Message
		} else {
			input = c.Input
		}
		// The first turn sends the case's whole input; later turns only
		// the new user message, which continues the stored history.
		out, err := r.runTurn(ctx, turnRequest{Assistant: s.Assistant, ChatID: res.ChatID, Messages: pending,
			Connector: r.connector(c), Metadata: c.metadata()}, nil)
		conversation = append(conversation, pending...)
		pending = nil
		addUsage(&res.Usage, out.Usage)
		res.Timings = out.Timings
		tr := out.turnResult(turn, input)
		res.Turns = append(res.Turns, tr)
		res.Trace = out.trace()
		if err != nil {
			r.emit(&Event{Type: EventTurn, Suite: s.Name, Kind: KindAgent, ID: c.ID, Run: res.Run, Turn: tr})
			res.Status, res.Error = StatusError, fmt.Sprintf("agent error at turn %d: %v", turn, err)
			return
		}
		conversation = append(conversation, chat.Message{Role: chat.RoleAssistant, Content: out.Text})
		tr.CheckpointsReached = r.checkpoints(ctx, ck, c, cps, out, turn)
		r.emit(&Event{Type: EventTurn, Suite: s.Name, Kind: KindAgent, ID: c.ID, Run: res.Run, Turn: tr})
		if len(missingRequired(c, cps)) == 0 {
			res.Status = StatusPassed
			return
		}
	}
	res.Status = StatusFailed
	res.Error = fmt.Sprintf("max turns (%d) exceeded without reaching all checkpoints: %s missing", maxTurns, strings.Join(missingRequired(c, cps), ", "))
}

// checkpoints checks the not yet reached checkpoints whose predecessors
// are reached against a turn's answer and returns those reached now.
func (r *runner) checkpoints(ctx context.Context, ck *appChecker, c *Case, cps map[string]*CheckpointResult, out *turnOutcome, turn int) []string {
	var reached []string
	text := out.combined()
	ans := &Answer{Output: text, Input: c.Input, ToolCalls: out.ToolCalls}
	for _, cp := range c.Checkpoints {
		st := cps[cp.ID]
		if st.Reached || !afterReached(cp, cps) {
			continue
		}
		results := evaluate(ctx, ck, cp.Assert, nil, ans)
		st.assertions = results
		msg := failures(results)
		if msg == "" {
			st.Reached, st.Passed, st.ReachedAtTurn = true, true, turn
			st.Message = passMessage(results)
			reached = append(reached, cp.ID)
		} else if st.Message == "" || !st.Reached {
			st.Message = msg
		}
		for i, a := range cp.Assert {
			if a.Type != "agent" || i >= len(results) {
				continue
			}
			criteria, _ := a.Value.(string)
			av := &AgentValidation{Passed: results[i].Passed, Reason: results[i].Message, Criteria: criteria, Input: text}
			if resp, ok := results[i].Expected.(map[string]any); ok {
				av.Response = resp
			}
			st.AgentValidation = av
		}
	}
	return reached
}

func passMessage(rs []*AssertionResult) string {
	var msgs []string
	for _, r := range rs {
		msgs = append(msgs, r.Message)
	}
	return strings.Join(msgs, "; ")
}

func afterReached(cp *Checkpoint, cps map[string]*CheckpointResult) bool {
	for _, id := range cp.After {
		if st, ok := cps[id]; ok && !st.Reached {
			return false
		}
	}
	return true
}

// missingRequired lists the required checkpoints not reached, in the
// case's order.
func missingRequired(c *Case, cps map[string]*CheckpointResult) []string {
	var out []string
	for _, cp := range c.Checkpoints {
		if st := cps[cp.ID]; st.Required && !st.Reached {
			out = append(out, cp.ID)
		}
	}
	return out
}

// simulate asks the simulator for the next user message.
func (r *runner) simulate(ctx context.Context, simID, connector string, c *Case, conv []chat.Message, cps map[string]*CheckpointResult,
	turn, maxTurns int, meta map[string]any, into *chat.Usage) (*simulatorOutput, error) {
	in := simulatorInput{Conversation: conv, TurnNumber: turn, MaxTurns: maxTurns}
	if in.Conversation == nil {
		in.Conversation = []chat.Message{}
	}
	in.Persona, _ = meta["persona"].(string)
	in.Goal, _ = meta["goal"].(string)
	for k, v := range meta {
		if k != "persona" && k != "goal" {
			if in.Extra == nil {
				in.Extra = map[string]any{}
			}
			in.Extra[k] = v
		}
	}
	for _, cp := range c.Checkpoints {
		if cps[cp.ID].Reached {
			in.CheckpointsReached = append(in.CheckpointsReached, cp.ID)
		} else {
			in.CheckpointsPending = append(in.CheckpointsPending, cp.ID)
		}
	}
	sort.Strings(in.CheckpointsReached)
	b, err := json.Marshal(in)
	if err != nil {
		return nil, err
	}
	out, err := r.helperChat(ctx, "simulator", simID, connector, string(b), into)
	if err != nil {
		return nil, err
	}
	v, ok := extractJSON(out.Text)
	m, isObj := v.(map[string]any)
	if !ok || !isObj {
		// Yao takes an answer that is not JSON as the message itself.
		if strings.TrimSpace(out.Text) == "" {
			return nil, fmt.Errorf("simulator %s answered nothing", simID)
		}
		return &simulatorOutput{Message: out.Text}, nil
	}
	so := &simulatorOutput{}
	so.Message, _ = m["message"].(string)
	so.GoalAchieved, _ = m["goal_achieved"].(bool)
	so.Reasoning, _ = m["reasoning"].(string)
	if so.Message == "" && !so.GoalAchieved {
		return nil, fmt.Errorf("simulator %s returned no message: %s", simID, preview(out.Text, 200))
	}
	return so, nil
}
