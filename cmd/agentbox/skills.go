package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/agentbox/agentbox/assistant"
	"github.com/agentbox/agentbox/chat"
	"github.com/agentbox/agentbox/pipeline"
	"github.com/agentbox/agentbox/sandbox"
	"github.com/agentbox/agentbox/store"
)

const skillsUsage = `usage: agentbox skills list      [--app DIR] [--user U] [--assistant A] [--status S] [--json]
       agentbox skills show      [--app DIR] [--user U] [--json] ID
       agentbox skills approve   [--app DIR] [--user U] ID
       agentbox skills reject    [--app DIR] [--user U] --reason TEXT ID
       agentbox skills test      [--app DIR] [--user U] [--prompt TEXT] ID
       agentbox skills installed [--app DIR] [--user U] [--assistant A] [--json]
       agentbox skills remove    [--app DIR] [--user U] ASSISTANT NAME

The skills agents proposed for a user (package.yao "skills": {"authoring":
true}) wait for that user's decision: approve one and it is installed from
the user's next turn on; reject one with a reason and it is kept with it.
test runs a test turn of a proposal in a throwaway sandbox and waits for
its outcome. --user is the user the proposals belong to (default "cli",
the user of agentbox run).
`

func runSkills(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	if len(args) == 0 || args[0] == "-h" || args[0] == "--help" || args[0] == "help" {
		fmt.Fprint(stdout, skillsUsage)
		return 0
	}
	sub, args := args[0], args[1:]
	fl := newFlags("skills "+sub, skillsUsage, stdout, stderr)
	appDir := fl.appFlag()
	user := fl.String("user", "cli", "the user whose proposals and skills these are")
	asJSON := fl.Bool("json", false, "print JSON")
	var assistantID, status, reason, prompt *string
	nargs := 1
	switch sub {
	case "list", "ls":
		assistantID = fl.String("assistant", "", "only this assistant's proposals")
		status = fl.String("status", "", "only proposals with this status: pending, approved, rejected or retired")
		nargs = 0
	case "show", "approve":
	case "reject":
		reason = fl.String("reason", "", "why the skill is rejected (required)")
	case "test":
		prompt = fl.String("prompt", "", "the request to try (default: the agent's test prompt)")
	case "installed":
		assistantID = fl.String("assistant", "", "only this assistant's skills")
		nargs = 0
	case "remove", "rm":
		nargs = 2
	default:
		return unknownSub("skills", skillsUsage, sub, []string{"list", "show", "approve", "reject", "test", "installed", "remove"}, stderr)
	}
	args, code, ok := fl.parse(args)
	if !ok {
		return code
	}
	if len(args) != nargs {
		return fl.usageError("want %d argument(s), got %d", nargs, len(args))
	}
	if err := sandbox.ValidateID("user", *user); err != nil {
		fmt.Fprintf(stderr, "agentbox skills: --user: %v\n", err)
		return 2
	}
	fail := func(err error) int {
		fmt.Fprintf(stderr, "agentbox skills %s: %s\n", sub, chatMessage(err))
		return 1
	}

	var gate *pipeline.Pipeline
	if sub == "test" {
		// A test turn needs what a turn needs: runtimes, workspaces.
		env, err := openEnv(ctx, envOptions{AppDir: *appDir, Logger: cliLogger(stderr, *asJSON)})
		if err != nil {
			return fail(err)
		}
		defer env.Close(context.WithoutCancel(ctx))
		gate = env.Pipeline
	} else {
		app, err := assistant.Load(*appDir)
		if err != nil {
			return fail(err)
		}
		storeCfg, err := app.Config.ResolveStore()
		if err != nil {
			return fail(err)
		}
		st, err := store.OpenConfig(ctx, storeCfg)
		if err != nil {
			return fail(err)
		}
		defer st.Close()
		if gate, err = pipeline.New(pipeline.Config{App: pipeline.Static{App: app}, Skills: st, Logger: cliLogger(stderr, *asJSON)}); err != nil {
			return fail(err)
		}
		defer gate.Close(context.WithoutCancel(ctx))
	}

	var out any
	switch sub {
	case "list", "ls":
		list, err := gate.SkillProposals(ctx, *user, pipeline.ProposalFilter{AssistantID: *assistantID, Status: *status, Limit: 1000})
		if err != nil {
			return fail(err)
		}
		if !*asJSON {
			printProposals(stdout, list)
			return 0
		}
		out = list
	case "installed":
		list, err := gate.UserSkills(ctx, *user, *assistantID)
		if err != nil {
			return fail(err)
		}
		if !*asJSON {
			tw := tabwriter.NewWriter(stdout, 0, 4, 2, ' ', 0)
			fmt.Fprintln(tw, "ASSISTANT\tNAME\tPROPOSAL\tAPPROVED\tNOTE")
			for _, s := range list {
				note := ""
				if s.Shadowed {
					note = "not installed: the assistant's own skill of that name wins"
				}
				fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\n", s.AssistantID, s.Name, s.ProposalID, s.ApprovedAt.UTC().Format(time.RFC3339), note)
			}
			tw.Flush()
			return 0
		}
		out = list
	case "remove", "rm":
		if err := gate.RemoveSkill(ctx, *user, args[0], args[1]); err != nil {
			return fail(err)
		}
		fmt.Fprintf(stdout, "removed skill %s of assistant %s for %s\n", args[1], args[0], *user)
		return 0
	default:
		id := args[0]
		var sp *pipeline.SkillProposal
		var err error
		switch sub {
		case "show":
			sp, err = gate.SkillProposal(ctx, *user, id)
		case "approve":
			sp, err = gate.ApproveSkill(ctx, *user, id)
		case "reject":
			sp, err = gate.RejectSkill(ctx, *user, id, *reason)
		case "test":
			if sp, err = gate.TestSkill(ctx, *user, id, *prompt); err == nil {
				fmt.Fprintf(stderr, "testing %s with %q...\n", id, sp.Test.Prompt)
				sp, err = waitSkillTest(ctx, gate, *user, id)
			}
		}
		if err != nil {
			return fail(err)
		}
		if !*asJSON {
			printProposal(stdout, sp, sub == "show" || sub == "test")
			return 0
		}
		out = sp
	}
	enc := json.NewEncoder(stdout)
	enc.SetIndent("", "  ")
	if err := enc.Encode(out); err != nil {
		return fail(err)
	}
	return 0
}

// waitSkillTest polls the proposal until its test ended.
func waitSkillTest(ctx context.Context, gate *pipeline.Pipeline, user, id string) (*pipeline.SkillProposal, error) {
	tick := time.NewTicker(250 * time.Millisecond)
	defer tick.Stop()
	for {
		sp, err := gate.SkillProposal(ctx, user, id)
		if err != nil || sp.Test == nil || sp.Test.Status != store.TestRunning {
			return sp, err
		}
		select {
		case <-ctx.Done():
			return nil, ctx.Err()
		case <-tick.C:
		}
	}
}

// chatMessage is what a user reads of an error: a *chat.Error's message.
func chatMessage(err error) string {
	var ce *chat.Error
	if errors.As(err, &ce) {
		return ce.Message
	}
	return err.Error()
}

func printProposals(w io.Writer, list []*pipeline.SkillProposal) {
	if len(list) == 0 {
		fmt.Fprintln(w, "no skill proposals")
		return
	}
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "ID\tASSISTANT\tNAME\tSTATUS\tTEST\tCREATED")
	for _, sp := range list {
		test := "-"
		if sp.Test != nil {
			test = sp.Test.Status
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%s\n", sp.ID, sp.AssistantID, sp.Name, sp.Status, test, sp.CreatedAt.UTC().Format(time.RFC3339))
	}
	tw.Flush()
}

func printProposal(w io.Writer, sp *pipeline.SkillProposal, full bool) {
	fmt.Fprintf(w, "proposal %s: skill %q for assistant %s, %s\n", sp.ID, sp.Name, sp.AssistantID, sp.Status)
	if sp.Reason != "" {
		fmt.Fprintf(w, "reason: %s\n", sp.Reason)
	}
	if !full {
		return
	}
	fmt.Fprintf(w, "proposed in chat %s at %s\n\n", sp.ChatID, sp.CreatedAt.UTC().Format(time.RFC3339))
	w.Write(sp.SkillFile())
	for _, f := range sp.Files {
		fmt.Fprintf(w, "\n--- %s\n%s", f.Path, f.Content)
		if !strings.HasSuffix(f.Content, "\n") {
			fmt.Fprintln(w)
		}
	}
	if t := sp.Test; t != nil {
		fmt.Fprintf(w, "\ntest (%s): %q\n", t.Status, t.Prompt)
		fmt.Fprintf(w, "  skill in the session's skills: %v; used: %v\n", t.SkillLoaded, t.SkillUsed)
		var calls []string
		for _, c := range t.ToolCalls {
			s := c.Name
			if c.IsError {
				s += " (failed)"
			}
			calls = append(calls, s)
		}
		if len(calls) > 0 {
			fmt.Fprintf(w, "  tool calls: %s\n", strings.Join(calls, ", "))
		}
		fmt.Fprintf(w, "  usage: %d in / %d out tokens, %d turns\n", t.Usage.InputTokens, t.Usage.OutputTokens, t.Usage.Turns)
		if t.Error != nil {
			fmt.Fprintf(w, "  error [%s]: %s\n", t.Error.Code, t.Error.Message)
		}
		if t.Answer != "" {
			fmt.Fprintf(w, "  answer:\n    %s\n", strings.ReplaceAll(strings.TrimSpace(t.Answer), "\n", "\n    "))
		}
	}
}
