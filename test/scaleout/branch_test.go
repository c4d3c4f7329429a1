package scaleout

import (
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/agentbox/agentbox/internal/e2etest"
)

// TestBranchingAcrossServers: a chat's rewind, fork, edited message and
// switch between its versions, each through either server (their
// checkpoints in the data root both share, the history in PostgreSQL),
// with Claude Code in Docker.
func TestBranchingAcrossServers(t *testing.T) {
	if testing.Short() {
		t.Skip("-short: integration test")
	}
	t.Parallel()
	branching(t, newCluster(t, `"limits": {"chat_wait": "3m"}`))
}

// TestBranchingAcrossServersOnKubernetes is TestBranchingAcrossServers
// with the sandboxes as pods of the local cluster.
func TestBranchingAcrossServersOnKubernetes(t *testing.T) {
	if testing.Short() {
		t.Skip("-short: integration test")
	}
	t.Parallel()
	branching(t, newClusterOn(t, kubernetesRuntime(t), `"limits": {"chat_wait": "3m"}`))
}

func branching(t *testing.T, c *cluster) {
	ctx := context.Background()
	chatID := e2etest.NewID("branch")
	mustDone(t, "turn 1 on A", c.a.Chat(ctx, e2etest.TokenAlice, "coder", chatID, "Turn 1. Add your file."))
	mustDone(t, "turn 2 on B", c.b.Chat(ctx, e2etest.TokenAlice, "coder", chatID, "Turn 2. Add your file."))
	files := func(chatID string) string {
		t.Helper()
		names, _ := filepath.Glob(filepath.Join(c.workspace(chatID), "turn*.txt"))
		for i := range names {
			names[i] = filepath.Base(names[i])
		}
		return strings.Join(names, ",")
	}
	send := func(s *server, path, body string) string {
		t.Helper()
		code, out := s.Send(t, "POST", path, e2etest.TokenAlice, "application/json", strings.NewReader(body))
		if code != 200 {
			t.Fatalf("%s %s on %s: %d %s", path, body, s.name, code, out)
		}
		return out
	}

	// A rewind through B to turn 1: turn 1's file, history and memory.
	send(c.b, "/api/chats/"+chatID+"/rewind", `{"turn": 1}`)
	if got, h := files(chatID), c.history(t, chatID); got != "turn1.txt" || len(h) != 2 {
		t.Fatalf("after the rewind: files %s, history %v", got, h)
	}
	notes, _, err := c.store.MemGet(ctx, "chat", "alice/"+chatID, "notes")
	var list []string
	if err != nil || json.Unmarshal(notes, &list) != nil || len(list) != 1 {
		t.Errorf("chat memory notes after the rewind = %s, %v; want turn 1's one", notes, err)
	}

	// A fork through A at turn 1, whose turn runs on B; the parent stays.
	var fork struct {
		ChatID string `json:"chat_id"`
	}
	if err := json.Unmarshal([]byte(send(c.a, "/api/chats/"+chatID+"/fork", `{"turn": 1}`)), &fork); err != nil || fork.ChatID == "" {
		t.Fatalf("fork: %+v %v", fork, err)
	}
	mustDone(t, "the fork's turn on B", c.b.Chat(ctx, e2etest.TokenAlice, "coder", fork.ChatID, "Turn 3. Add your file."))
	if got, parent := files(fork.ChatID), files(chatID); got != "turn1.txt,turn3.txt" || parent != "turn1.txt" {
		t.Errorf("files: fork %s, parent %s", got, parent)
	}

	// Turn 1 edited and sent again through A: from the state before it.
	out := send(c.a, "/api/assistants/coder/chat", `{"chat_id": "`+chatID+`", "message": "Turn 4. Add your file.", "edit": 1}`)
	if !strings.Contains(out, "Done.") {
		t.Fatalf("edited turn: %s", out)
	}
	if got, h := files(chatID), c.history(t, chatID); got != "turn4.txt" || strings.Join(h, "|") != "user: Turn 4. Add your file.|assistant: Done." {
		t.Errorf("after the edit: files %s, history %v", got, h)
	}
	// Its versions through B, and a switch back to the first through A:
	// that branch as it was left, both its turns.
	var bs struct {
		Data []struct {
			Turn     int               `json:"turn"`
			Current  int               `json:"current"`
			Versions []json.RawMessage `json:"versions"`
		} `json:"data"`
	}
	code, body := c.b.Send(t, "GET", "/api/chats/"+chatID+"/branches", e2etest.TokenAlice, "", nil)
	if err := json.Unmarshal([]byte(body), &bs); code != 200 || err != nil || len(bs.Data) != 1 || len(bs.Data[0].Versions) != 2 || bs.Data[0].Current != 1 {
		t.Fatalf("branches: %d %s", code, body)
	}
	send(c.a, "/api/chats/"+chatID+"/switch", `{"turn": 1, "version": 1}`)
	if got, h := files(chatID), c.history(t, chatID); got != "turn1.txt,turn2.txt" || len(h) != 4 {
		t.Errorf("switched to version 1: files %s, history %v", got, h)
	}
	if _, err := os.Stat(c.workspace(fork.ChatID)); err != nil {
		t.Errorf("the fork's workspace: %v", err)
	}
}
