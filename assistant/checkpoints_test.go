package assistant

import (
	"strings"
	"testing"
)

// TestCleanupCheckpoints: cleanup.checkpoints defaults to
// DefaultCheckpoints, 0 turns checkpoints off, a negative count is an error
// that names the field.
func TestCleanupCheckpoints(t *testing.T) {
	t.Parallel()
	for _, tt := range []struct {
		jsonc string
		want  int
	}{
		{`{}`, DefaultCheckpoints},
		{`{"cleanup": {"checkpoints": 0}}`, 0},
		{`{"cleanup": {"checkpoints": 7}}`, 7},
	} {
		app, err := Load(writeApp(t, checkpointsApp(tt.jsonc)))
		if err != nil {
			t.Fatalf("%s: %v", tt.jsonc, err)
		}
		if got := app.Config.Cleanup.Checkpoints; got != tt.want {
			t.Errorf("%s: checkpoints = %d, want %d", tt.jsonc, got, tt.want)
		}
	}
	_, err := Load(writeApp(t, checkpointsApp(`{"cleanup": {"checkpoints": -1}}`)))
	if err == nil || !strings.Contains(err.Error(), "cleanup.checkpoints is -1") {
		t.Errorf("a negative count: %v", err)
	}
}

// checkpointsApp is an app of one direct assistant with the app.jsonc.
func checkpointsApp(jsonc string) map[string]string {
	return map[string]string{
		"app.jsonc":                 jsonc,
		"connectors/m.conn.yao":     `{"type": "openai", "options": {"model": "m", "key": "k"}}`,
		"assistants/qa/package.yao": `{"connector": "m"}`,
	}
}
