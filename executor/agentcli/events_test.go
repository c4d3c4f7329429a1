package agentcli_test

import (
	"reflect"
	"strings"
	"testing"
	"time"
	"unicode/utf8"

	"github.com/tidwall/gjson"

	"github.com/agentbox/agentbox/chat"
	"github.com/agentbox/agentbox/chat/chattest"
	"github.com/agentbox/agentbox/executor/agentcli"
)

func TestEventsIDsAndNotices(t *testing.T) {
	t.Parallel()
	log := &chattest.Recorder{}
	ev := agentcli.NewEvents(log.Emit, "xx", 0)
	if id := ev.NewID(); id != "xx-1" || ev.Seq() != 1 {
		t.Errorf("id %s seq %d", id, ev.Seq())
	}
	ev.MCPFailed("gh", "failed")
	ev.Notice("custom", "something to know", map[string]any{"n": 2})
	if got := ev.Notices(); !reflect.DeepEqual(got, []string{agentcli.NoticeMCPFailed, "custom"}) {
		t.Errorf("notices %v", got)
	}
	evs := log.Starts(chat.TypeNotice)
	if len(evs) != 2 || evs[0].ID != "xx-2" || evs[1].ID != "xx-3" {
		t.Fatalf("notice events %+v", evs)
	}
	if p := evs[0].Props; p["code"] != agentcli.NoticeMCPFailed || p["server"] != "gh" || p["status"] != "failed" {
		t.Errorf("mcp notice %+v", p)
	}
	if p := evs[1].Props; p["code"] != "custom" || p["message"] != "something to know" || p["n"] != 2 || evs[1].Text != "something to know" {
		t.Errorf("notice %+v", evs[1])
	}
	chattest.Check(t, log.Events())
}

// TestToolFailureStreak: the notice comes once, at the threshold, for
// failures of one tool in a row; a success or another tool resets.
func TestToolFailureStreak(t *testing.T) {
	t.Parallel()
	type call struct {
		name    string
		isErr   bool
		content string
	}
	tests := []struct {
		name      string
		threshold int
		calls     []call
		want      []string // the tool prop of each notice
	}{
		{"three in a row", 0, []call{{"Bash", true, ""}, {"Bash", true, ""}, {"Bash", true, ""}, {"Bash", true, ""}}, []string{"Bash"}},
		{"reset by success", 0, []call{{"Bash", true, ""}, {"Bash", true, ""}, {"Bash", false, ""}, {"Bash", true, ""}, {"Bash", true, ""}}, nil},
		{"reset by another tool", 0, []call{{"Bash", true, ""}, {"Bash", true, ""}, {"Read", true, ""}, {"Bash", true, ""}}, nil},
		{"refusals are no failures", 0, []call{{"Write", true, "Tool execution denied by policy."}, {"Write", true, "disk full"}, {"Write", true, "Tool execution denied by policy."},
			{"Write", true, "disk full"}, {"Write", true, "exec command rejected by user"}, {"Write", true, "disk full"}}, []string{"Write"}},
		{"threshold two, twice", 2, []call{{"Read", true, ""}, {"Read", true, ""}, {"Read", false, ""}, {"", true, ""}, {"", true, ""}}, []string{"Read", ""}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			log := &chattest.Recorder{}
			ev := agentcli.NewEvents(log.Emit, "t", tc.threshold)
			for _, c := range tc.calls {
				ev.ToolResultContent(c.name, c.isErr, c.content)
			}
			var got []string
			for _, e := range log.Starts(chat.TypeNotice) {
				if e.Props["code"] != agentcli.NoticeRepeatedToolFailure {
					t.Errorf("code %v", e.Props["code"])
				}
				got = append(got, e.Props["tool"].(string))
				if e.Props["tool"] == "" && e.Text != "a tool failed 2 times in a row; the agent may be stuck" {
					t.Errorf("text %q", e.Text)
				}
			}
			if !reflect.DeepEqual(got, tc.want) {
				t.Errorf("notices for %q, want %q", got, tc.want)
			}
		})
	}
}

func TestLineStats(t *testing.T) {
	t.Parallel()
	var c agentcli.LineStats
	var objects []string
	for _, l := range []string{`{"type":"x"}`, "  ", "warning: noise", `  {"a":1}` + "\r", `{"cut":`, ""} {
		if s, ok := c.Object(agentcli.Line{Bytes: []byte(l)}); ok {
			objects = append(objects, s)
		}
	}
	if _, ok := c.Object(agentcli.Line{Size: 1 << 30, Dropped: true}); ok {
		t.Error("a dropped line is an object")
	}
	if !reflect.DeepEqual(objects, []string{`{"type":"x"}`, `  {"a":1}` + "\r"}) || c.Lines != 7 || c.Skipped != 3 || c.Dropped != 1 {
		t.Errorf("objects %q, stats %+v", objects, c)
	}
}

func TestOutcomeResult(t *testing.T) {
	t.Parallel()
	started := time.Now().Add(-1500 * time.Millisecond)
	o := agentcli.Outcome{Content: "hi", Notices: []string{"n"}}
	res := o.Result("fallback", started)
	if res.Content != "hi" || res.SessionID != "fallback" || res.Usage.DurationMS < 1500 || len(res.Notices) != 1 {
		t.Errorf("result %+v", res)
	}
	o.SessionID, o.Usage.DurationMS = "from-cli", 7
	if res := o.Result("fallback", started); res.SessionID != "from-cli" || res.Usage.DurationMS != 7 {
		t.Errorf("result %+v", res)
	}
}

func TestSessionEvent(t *testing.T) {
	t.Parallel()
	line := `{"tools":["Bash","Read"],"mcp_servers":[{"name":"gh","status":"connected"},{"name":"x","status":"failed"}]}`
	r := gjson.GetMany(line, "tools", "mcp_servers", "missing")
	if got := agentcli.Strings(r[0]); !reflect.DeepEqual(got, []string{"Bash", "Read"}) {
		t.Errorf("strings %v", got)
	}
	if got := agentcli.Strings(r[2]); got == nil || len(got) != 0 {
		t.Errorf("strings of nothing %#v", got)
	}
	servers := agentcli.ServerStatuses(r[1])
	if want := []agentcli.ServerStatus{{"gh", "connected"}, {"x", "failed"}}; !reflect.DeepEqual(servers, want) {
		t.Errorf("servers %v", servers)
	}
	log := &chattest.Recorder{}
	ev := agentcli.NewEvents(log.Emit, "s", 0)
	ev.Session(agentcli.Session{ID: "id", Model: "m", Cwd: "/workspace", MCPServers: servers,
		Version: "1.2"})
	evs := log.Starts(chat.TypeSession)
	if len(evs) != 1 || evs[0].ID != "s-1" {
		t.Fatalf("events %+v", evs)
	}
	want := map[string]any{"session_id": "id", "model": "m", "cwd": "/workspace", "tools": []string{}, "skills": []string{},
		"version": "1.2", "mcp_servers": []map[string]any{{"name": "gh", "status": "connected"}, {"name": "x", "status": "failed"}}}
	if !reflect.DeepEqual(evs[0].Props, want) {
		t.Errorf("props %#v", evs[0].Props)
	}
}

func TestKeptResult(t *testing.T) {
	t.Parallel()
	if got := agentcli.KeptResult("short"); got != "short" {
		t.Errorf("short: %q", got)
	}
	long := strings.Repeat("é", agentcli.MaxKeptResult) // two bytes a rune
	if got := agentcli.KeptResult("x" + long); len(got) != agentcli.MaxKeptResult-1 || !utf8.ValidString(got) {
		t.Errorf("long: %d bytes, valid %v", len(got), utf8.ValidString(got))
	}
}
