package assistant

import (
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// appWith copies the minimal app and gives it appJSONC as app.jsonc.
func appWith(t *testing.T, appJSONC string) string {
	t.Helper()
	dir := filepath.Join(t.TempDir(), "app")
	if out, err := exec.Command("cp", "-r", filepath.Join(appsDir, "minimal"), dir).CombinedOutput(); err != nil {
		t.Fatalf("cp: %v %s", err, out)
	}
	if err := os.WriteFile(filepath.Join(dir, AppFile), []byte(appJSONC), 0o644); err != nil {
		t.Fatal(err)
	}
	return dir
}

func TestLimitsDefaults(t *testing.T) {
	t.Parallel()
	app, err := Load(filepath.Join(appsDir, "minimal"))
	if err != nil {
		t.Fatal(err)
	}
	if app.Config.Limits != DefaultLimits() || app.Config.DrainTimeout != DefaultDrainTimeout {
		t.Errorf("limits = %+v, drain %s", app.Config.Limits, app.Config.DrainTimeout)
	}
	// A zero Limits (an AppConfig built by hand) is the defaults; a partly
	// set one keeps what is set, chat_queue 0 included.
	if (Limits{}).WithDefaults() != DefaultLimits() {
		t.Error("zero Limits is not the defaults")
	}
	got := Limits{TurnsPerUser: 2}.WithDefaults()
	if got.TurnsPerUser != 2 || got.ChatQueue != 0 || got.Sandboxes != DefaultSandboxes || got.Breaker.Cooldown != DefaultBreakerCooldown {
		t.Errorf("partial = %+v", got)
	}
}

func TestLimitsFromAppJSONC(t *testing.T) {
	app, err := Load(appWith(t, `{
		"limits": {"turns_per_user": 2, "terminals_per_user": 1, "chat_queue": 0, "chat_wait": "30s", "sandboxes": 3, "sandbox_wait": "5s",
			"kept_chats": 5, "kept_memory": "6g", "pool": {"total": 3, "memory": "1g", "refill": 4},
			"workspaces_per_user": 50, "disk_per_user": "20g", "uploads": 3, "uploads_per_user": 2,
			"breaker": {"failures": 7, "cooldown": "1m"}, "request_body": "64m"},
		"drain_timeout": "5s",
		"auth": {"tokens": [{"token": "t1", "user": "alice"}], "metrics_token": "$ENV.AGENTBOX_TEST_METRICS"},
	}`))
	if err != nil {
		t.Fatal(err)
	}
	want := Limits{TurnsPerUser: 2, TerminalsPerUser: 1, ChatQueue: 0, ChatWait: 30 * time.Second, Sandboxes: 3, SandboxWait: 5 * time.Second,
		KeptChats: 5, KeptMemory: 6 << 30, Pool: PoolLimits{Total: 3, Memory: 1 << 30, Refill: 4},
		WorkspacesPerUser: 50, DiskPerUser: 20 << 30, Uploads: 3, UploadsPerUser: 2,
		Breaker: BreakerLimits{Failures: 7, Cooldown: time.Minute}, RequestBody: 64 << 20}
	if app.Config.Limits != want || app.Config.DrainTimeout != 5*time.Second {
		t.Errorf("limits = %+v, drain %s", app.Config.Limits, app.Config.DrainTimeout)
	}
	if _, err := app.Config.ResolveMetricsToken(); !errors.Is(err, ErrEnvNotSet) || !strings.Contains(err.Error(), "AGENTBOX_TEST_METRICS") {
		t.Errorf("unset metrics token: %v", err)
	}
	t.Setenv("AGENTBOX_TEST_METRICS", "operator-secret")
	if tok, err := app.Config.ResolveMetricsToken(); err != nil || tok != "operator-secret" {
		t.Errorf("metrics token = %q, %v", tok, err)
	}
}

// TestLimitsProblems: a bad value is a problem with its position, all at
// once.
func TestLimitsProblems(t *testing.T) {
	t.Parallel()
	_, err := Load(appWith(t, `{
  "limits": {
    "turns_per_user": 0,
    "terminals_per_user": 0,
    "chat_queue": -1,
    "chat_wait": "soon",
    "sandboxes": "many",
    "sandbox_wait": "2h",
    "breaker": {"failures": 5, "cooldown": "0s", "half_open": 1},
  },
  "drain_timeout": "forever",
  "auth": {"tokens": [{"token": "same", "user": "alice"}], "metrics_token": "same"},
}`))
	var le *LoadError
	if !errors.As(err, &le) {
		t.Fatalf("err = %v", err)
	}
	text := err.Error()
	for _, want := range []string{
		"app.jsonc:3:23: limits.turns_per_user: 0 is out of range: want 1 to 10000",
		"app.jsonc:4:27: limits.terminals_per_user: 0 is out of range: want 1 to 1000",
		"app.jsonc:5:19: limits.chat_queue: -1 is out of range: want 0 to 1000",
		`app.jsonc:6:18: limits.chat_wait: invalid duration "soon"`,
		"app.jsonc:7:18: limits.sandboxes: want an integer, got a string",
		`app.jsonc:8:21: limits.sandbox_wait "2h" is out of range: want 1s to 1h`,
		`app.jsonc:9:44: limits.breaker.cooldown "0s" must be positive`,
		`unknown field "half_open"`,
		`app.jsonc:11:20: drain_timeout: invalid duration "forever"`,
		"auth.metrics_token: the same token as auth.tokens[0]",
	} {
		if !strings.Contains(text, want) {
			t.Errorf("problems lack %q:\n%s", want, text)
		}
	}
}

// TestRequestBodyLimit: limits.request_body is a size from 64k to 1g,
// 32 MB when left out.
func TestRequestBodyLimit(t *testing.T) {
	t.Parallel()
	if d := DefaultLimits(); d.RequestBody != 32<<20 {
		t.Errorf("default request_body = %d", d.RequestBody)
	}
	for _, v := range []string{"2g", "1k", "lots"} {
		_, err := Load(appWith(t, `{"limits": {"request_body": "`+v+`"}}`))
		if want := `app.jsonc:1:29: limits.request_body: "` + v + `": want a size from 64k to 1g, like "32m"`; err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("request_body %q: %v, want %q", v, err, want)
		}
	}
}

// TestKeptLimits: the kept chats' caps, their defaults and their problems.
func TestKeptLimits(t *testing.T) {
	t.Parallel()
	if d := DefaultLimits(); d.KeptChats != DefaultKeptChats || d.KeptMemory != 0 || d.KeptMemoryShare != DefaultKeptMemoryShare {
		t.Errorf("defaults %+v", d)
	}
	app, err := Load(appWith(t, `{"limits": {"kept_memory": "25%"}}`))
	if err != nil || app.Config.Limits.KeptMemoryShare != 0.25 || app.Config.Limits.KeptMemory != 0 || app.Config.Limits.KeptChats != DefaultKeptChats {
		t.Fatalf("limits %+v, %v", app.Config.Limits, err)
	}
	_, err = Load(appWith(t, `{"limits": {
  "kept_chats": 0,
  "kept_memory": "150%",
  "pool": {"total": 0, "memory": "lots", "refill": 500},
}}`))
	for _, want := range []string{
		"app.jsonc:2:17: limits.kept_chats: 0 is out of range: want 1 to 10000",
		`app.jsonc:3:18: limits.kept_memory: "150%": want a share of the host's memory from 1% to 100%`,
		"limits.pool.total: 0 is out of range: want 1 to 1000",
		`limits.pool.memory: "lots": want a size from 64m to 16t`,
		"limits.pool.refill: 500 is out of range: want 1 to 100",
	} {
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("problems lack %q: %v", want, err)
		}
	}
}

// TestModelProxyLimits: limits.model_proxy, left to the bridge's defaults
// (zero) unless set, and its problems.
func TestModelProxyLimits(t *testing.T) {
	t.Parallel()
	app, err := Load(appWith(t, `{"limits": {"model_proxy": {"calls_per_turn": 200, "parallel_calls": 8, "connections": 16, "request_memory": "128m"}}}`))
	want := ModelProxyLimits{CallsPerTurn: 200, ParallelCalls: 8, Connections: 16, RequestMemory: 128 << 20}
	if err != nil || app.Config.Limits.ModelProxy != want {
		t.Fatalf("limits %+v, %v", app.Config.Limits.ModelProxy, err)
	}
	if d := DefaultLimits().ModelProxy; d != (ModelProxyLimits{}) {
		t.Errorf("defaults %+v: want the bridge's (zero)", d)
	}
	_, err = Load(appWith(t, `{"limits": {"model_proxy": {
  "calls_per_turn": 0,
  "parallel_calls": 5000,
  "connections": 2,
  "request_memory": "1m",
  "per_user": 1,
}}}`))
	for _, want := range []string{
		"app.jsonc:2:21: limits.model_proxy.calls_per_turn: 0 is out of range: want 1 to 1000000",
		"app.jsonc:3:21: limits.model_proxy.parallel_calls: 5000 is out of range: want 1 to 1000",
		"app.jsonc:4:18: limits.model_proxy.connections: 2 is out of range: want 4 to 10000",
		`app.jsonc:5:21: limits.model_proxy.request_memory: "1m": want a size from 64m to 16t`,
		`unknown field "per_user"`,
	} {
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("problems lack %q: %v", want, err)
		}
	}
}

func TestParseMemoryCap(t *testing.T) {
	t.Parallel()
	for in, want := range map[string]struct {
		n     int64
		share float64
	}{"8g": {8 << 30, 0}, "512m": {512 << 20, 0}, "50%": {0, 0.5}, " 25 % ": {0, 0.25}} {
		n, share, err := ParseMemoryCap(in)
		if err != nil || n != want.n || share != want.share {
			t.Errorf("%q: %d, %v, %v", in, n, share, err)
		}
	}
	for _, bad := range []string{"", "0%", "lots", "1k", "-5g"} {
		if _, _, err := ParseMemoryCap(bad); err == nil {
			t.Errorf("%q: no error", bad)
		}
	}
}

// TestUserDiskLimits: the per-user bounds on workspaces, their disk and
// uploads, their defaults and their problems.
func TestUserDiskLimits(t *testing.T) {
	t.Parallel()
	d := DefaultLimits()
	if d.WorkspacesPerUser != DefaultWorkspacesPerUser || d.DiskPerUser != 0 || d.DiskPerUserShare != DefaultDiskPerUserShare ||
		d.Uploads != DefaultUploads || d.UploadsPerUser != DefaultUploadsPerUser {
		t.Errorf("defaults %+v", d)
	}
	if got := (Limits{TurnsPerUser: 1}).WithDefaults(); got.WorkspacesPerUser != DefaultWorkspacesPerUser || got.DiskPerUserShare != DefaultDiskPerUserShare || got.Uploads != DefaultUploads {
		t.Errorf("partial %+v", got)
	}
	app, err := Load(appWith(t, `{"limits": {"disk_per_user": "25%"}}`))
	if err != nil || app.Config.Limits.DiskPerUserShare != 0.25 || app.Config.Limits.DiskPerUser != 0 {
		t.Fatalf("limits %+v, %v", app.Config.Limits, err)
	}
	_, err = Load(appWith(t, `{"limits": {
  "workspaces_per_user": 0,
  "disk_per_user": "1k",
  "uploads": -1,
  "uploads_per_user": "four",
}}`))
	for _, want := range []string{
		"app.jsonc:2:26: limits.workspaces_per_user: 0 is out of range: want 1 to 1000000",
		`app.jsonc:3:20: limits.disk_per_user: "1k": want a size from 64m to 16t (like "8g") or a share of the data root's disk (like "10%")`,
		"app.jsonc:4:14: limits.uploads: -1 is out of range",
		"limits.uploads_per_user: want an integer, got a string",
	} {
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("problems lack %q: %v", want, err)
		}
	}
}

// TestSandboxPool: sandbox.pool in both forms, and its range.
func TestSandboxPool(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		src  string
		want int
		prob string
	}{
		{`{"sandbox": {"command": "claude", "pool": 3}}`, 3, ""},
		{`{"sandbox": {"command": "claude"}}`, 0, ""},
		{`{"sandbox": {"version": "2.0", "runner": {"name": "claude"}, "pool": 2}}`, 2, ""},
		{`{"sandbox": {"command": "claude", "pool": 65}}`, 0, "sandbox.pool 65 is out of range: want 0 to 64"},
		{`{"sandbox": {"command": "claude", "pool": -1}}`, 0, "sandbox.pool -1 is out of range"},
	} {
		var raw rawPackage
		d := decodeJSONC("package.yao", []byte(tc.src), &raw)
		app := &App{Config: &AppConfig{}, Agent: &AgentSettings{}}
		l := &loader{connIDs: map[string]bool{}}
		a := &Assistant{ID: "a", Dir: t.TempDir()}
		l.loadSandbox(d, a, raw.Sandbox, app, "")
		var probs []string
		for _, p := range d.probs {
			probs = append(probs, p.String())
		}
		got := strings.Join(probs, "\n")
		switch {
		case tc.prob == "" && got != "":
			t.Errorf("%s: problems %s", tc.src, got)
		case tc.prob != "" && !strings.Contains(got, tc.prob):
			t.Errorf("%s: problems %q, want %q", tc.src, got, tc.prob)
		case tc.prob == "" && (a.Sandbox == nil || a.Sandbox.Pool != tc.want):
			t.Errorf("%s: sandbox %+v, want pool %d", tc.src, a.Sandbox, tc.want)
		}
	}
}
