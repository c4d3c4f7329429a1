package server

import (
	"context"
	"encoding/json"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/agentbox/agentbox/pipeline"
	"github.com/agentbox/agentbox/skills"
	"github.com/agentbox/agentbox/store"
)

// skillsServer serves the fake backend with a real pipeline and store as
// its skill gate, and stores alice's proposals p1 (release-notes, with a
// test prompt), p2 (lint-fix) and p3 (code-review: a name the coder's own
// skills have).
func skillsServer(t *testing.T) (*fakeBackend, *store.Store, func(method, path, token, body string) (int, string)) {
	t.Helper()
	ctx := context.Background()
	st, err := store.Open(ctx, filepath.Join(t.TempDir(), "agentbox.db"))
	t.Cleanup(func() {
		if st != nil {
			st.Close()
		}
	})
	if err != nil {
		t.Fatal(err)
	}
	fb := newFake(t)
	p, err := pipeline.New(pipeline.Config{App: pipeline.Static{App: fb.app}, Skills: st, Logger: quietLogger()})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { p.Close(context.Background()) })
	at := time.Now().Add(-time.Hour)
	for i, name := range []string{"release-notes", "lint-fix", "code-review"} {
		sp := &store.SkillProposal{ID: "p" + string(rune('1'+i)), UserID: "alice", AssistantID: "coder", ChatID: "c1",
			Draft: skills.Draft{Name: name, Description: "Does " + name + ".", Instructions: "# " + name + "\nSteps.\n",
				Files: []skills.File{{Path: "scripts/run.sh", Content: "echo ok\n"}}},
			Status: store.ProposalPending, CreatedAt: at.Add(time.Duration(i) * time.Minute)}
		if name == "release-notes" {
			sp.TestPrompt = "Notes for v1, please."
		}
		if err := st.CreateSkillProposal(ctx, sp, 0); err != nil {
			t.Fatal(err)
		}
	}
	ts := startServer(t, fb, func(c *Config) { c.Skills = p })
	return fb, st, func(method, path, token, body string) (int, string) {
		t.Helper()
		resp, out := do(t, ts, method, path, token, body)
		return resp.StatusCode, out
	}
}

func TestSkillRoutes(t *testing.T) {
	t.Parallel()
	_, _, call := skillsServer(t)

	// Listings: the user's own, newest first, without the skill's content.
	code, out := call("GET", "/api/skills/proposals", tokenAlice, "")
	var list struct {
		Object string                       `json:"object"`
		Data   []map[string]json.RawMessage `json:"data"`
	}
	if err := json.Unmarshal([]byte(out), &list); code != 200 || err != nil || len(list.Data) != 3 ||
		string(list.Data[0]["id"]) != `"p3"` || list.Data[0]["instructions"] != nil && string(list.Data[0]["instructions"]) != `""` {
		t.Fatalf("list = %d %s", code, out)
	}
	if code, out := call("GET", "/api/skills/proposals", tokenBob, ""); code != 200 || !strings.Contains(out, `"data":[]`) {
		t.Fatalf("bob's list = %d %s", code, out)
	}
	if code, out := call("GET", "/api/skills/proposals?status=done", tokenAlice, ""); code != 400 || apiErr(t, out).Param == nil {
		t.Fatalf("bad status filter = %d %s", code, out)
	}

	// Details: the whole skill with its SKILL.md; another user's is a 404.
	code, out = call("GET", "/api/skills/proposals/p1", tokenAlice, "")
	if code != 200 || !strings.Contains(out, `"skill_md":"---\nname: release-notes\ndescription: Does release-notes.\n---\n\n# release-notes`) ||
		!strings.Contains(out, `"object":"skill_proposal"`) || !strings.Contains(out, `"scripts/run.sh"`) {
		t.Fatalf("details = %d %s", code, out)
	}
	for _, path := range []string{"/api/skills/proposals/p1", "/api/skills/proposals/p1/approve", "/api/skills/proposals/p1/reject", "/api/skills/proposals/p1/test"} {
		method := "POST"
		if !strings.Contains(path, "/p1/") {
			method = "GET"
		}
		body := ""
		if strings.HasSuffix(path, "/reject") {
			body = `{"reason":"mine now"}`
		}
		if code, out := call(method, path, tokenBob, body); code != 404 || apiErr(t, out).Code != "invalid_request" {
			t.Errorf("bob %s %s = %d %s", method, path, code, out)
		}
	}
	if code, _ := call("GET", "/api/skills/proposals/nope", tokenAlice, ""); code != 404 {
		t.Fatalf("unknown proposal = %d", code)
	}

	// Rejection needs a reason, and keeps it.
	if code, out := call("POST", "/api/skills/proposals/p2/reject", tokenAlice, `{}`); code != 400 || *apiErr(t, out).Param != "reason" {
		t.Fatalf("reject without a reason = %d %s", code, out)
	}
	if code, out := call("POST", "/api/skills/proposals/p2/reject", tokenAlice, `{"reason":"x","extra":1}`); code != 400 {
		t.Fatalf("reject with an unknown field = %d %s", code, out)
	}
	if code, out := call("POST", "/api/skills/proposals/p2/reject", tokenAlice, `{"reason":"It guesses the linter."}`); code != 200 ||
		!strings.Contains(out, `"status":"rejected"`) || !strings.Contains(out, `"reason":"It guesses the linter."`) {
		t.Fatalf("reject = %d %s", code, out)
	}
	if code, out := call("POST", "/api/skills/proposals/p2/approve", tokenAlice, ""); code != 409 || apiErr(t, out).Code != "skill_conflict" {
		t.Fatalf("approving a rejected proposal = %d %s", code, out)
	}

	// A name of the assistant's own skills cannot be approved.
	if code, out := call("POST", "/api/skills/proposals/p3/approve", tokenAlice, ""); code != 409 || !strings.Contains(out, "wins a name clash") {
		t.Fatalf("approving a shadowed name = %d %s", code, out)
	}

	// A test runs in the background: 202, then its outcome (this server
	// has no sandbox runtime, so the turn fails and says why).
	if code, out := call("POST", "/api/skills/proposals/p3/test", tokenAlice, ""); code != 400 || *apiErr(t, out).Param != "prompt" {
		t.Fatalf("test without a prompt = %d %s", code, out)
	}
	code, out = call("POST", "/api/skills/proposals/p1/test", tokenAlice, "")
	if code != 202 || !strings.Contains(out, `"prompt":"Notes for v1, please."`) {
		t.Fatalf("test = %d %s", code, out)
	}
	deadline := time.Now().Add(10 * time.Second)
	for {
		_, out = call("GET", "/api/skills/proposals/p1", tokenAlice, "")
		if !strings.Contains(out, `"status":"running"`) {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("test still running: %s", out)
		}
		time.Sleep(20 * time.Millisecond)
	}
	if !strings.Contains(out, `"status":"failed"`) || !strings.Contains(out, `"code":"sandbox"`) {
		t.Fatalf("test outcome: %s", out)
	}

	// Approval makes it one of the user's skills; removing it retires it.
	if code, out := call("POST", "/api/skills/proposals/p1/approve", tokenAlice, ""); code != 200 || !strings.Contains(out, `"status":"approved"`) {
		t.Fatalf("approve = %d %s", code, out)
	}
	if code, out := call("GET", "/api/skills?assistant=coder", tokenAlice, ""); code != 200 ||
		!strings.Contains(out, `"name":"release-notes"`) || !strings.Contains(out, `"proposal_id":"p1"`) {
		t.Fatalf("user skills = %d %s", code, out)
	}
	if code, out := call("GET", "/api/skills", tokenBob, ""); code != 200 || !strings.Contains(out, `"data":[]`) {
		t.Fatalf("bob's skills = %d %s", code, out)
	}
	if code, _ := call("DELETE", "/api/assistants/coder/skills/release-notes", tokenBob, ""); code != 404 {
		t.Fatalf("bob removing alice's skill = %d", code)
	}
	if code, out := call("DELETE", "/api/assistants/coder/skills/release-notes", tokenAlice, ""); code != 200 || !strings.Contains(out, `"deleted":true`) {
		t.Fatalf("remove = %d %s", code, out)
	}
	if code, out := call("GET", "/api/skills/proposals/p1", tokenAlice, ""); code != 200 || !strings.Contains(out, `"status":"retired"`) {
		t.Fatalf("removed skill's proposal = %d %s", code, out)
	}
}

// TestSkillRoutesWithoutGate: a server whose backend keeps no proposals
// answers the skill routes with 404.
func TestSkillRoutesWithoutGate(t *testing.T) {
	t.Parallel()
	ts := startServer(t, newFake(t), nil)
	for _, r := range [][2]string{{"GET", "/api/skills/proposals"}, {"GET", "/api/skills"}, {"POST", "/api/skills/proposals/p1/approve"}} {
		if resp, out := do(t, ts, r[0], r[1], tokenAlice, ""); resp.StatusCode != 404 || !strings.Contains(out, "keeps no skill proposals") {
			t.Errorf("%s %s = %d %s", r[0], r[1], resp.StatusCode, out)
		}
	}
}
