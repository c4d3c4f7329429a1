package assistant

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func TestParseDisk(t *testing.T) {
	t.Parallel()
	tests := []struct {
		in   string
		want int64
		err  string
	}{
		{"10g", 10 << 30, ""}, {"512m", 512 << 20, ""}, {"1t", 1 << 40, ""}, {"16t", 16 << 40, ""}, {"32m", 32 << 20, ""},
		{"1.5g", 3 << 29, ""}, {"10GB", 10 << 30, ""},
		{"31m", 0, "out of range"}, {"17t", 0, "out of range"}, {"0", 0, "out of range"},
		{"10x", 0, "invalid size"}, {"", 0, "invalid size"}, {"-1g", 0, "invalid size"},
	}
	for _, tt := range tests {
		got, err := ParseDisk(tt.in)
		if got != tt.want || (err == nil) != (tt.err == "") || (err != nil && !strings.Contains(err.Error(), tt.err)) {
			t.Errorf("ParseDisk(%q) = %d, %v; want %d, %q", tt.in, got, err, tt.want, tt.err)
		}
	}
}

// writeDiskApp writes an app with app.jsonc appCfg ("" for none) and the
// assistants a (max_disk "50g") and b (none).
func writeDiskApp(t *testing.T, appCfg, aDisk string) string {
	t.Helper()
	root := t.TempDir()
	files := map[string]string{
		"connectors/claude.conn.yao":    `{"type": "anthropic", "options": {"key": "$ENV.ANTHROPIC_API_KEY", "model": "m"}}`,
		"assistants/a/package.yao":      `{"connector": "claude", "sandbox": {"command": "claude", "max_disk": "` + aDisk + `"}}`,
		"assistants/b/package.yao":      `{"connector": "claude", "sandbox": {"command": "claude"}}`,
		"assistants/direct/package.yao": `{"connector": "claude"}`,
	}
	if appCfg != "" {
		files["app.jsonc"] = appCfg
	}
	for p, c := range files {
		if err := os.MkdirAll(filepath.Dir(filepath.Join(root, p)), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(root, p), []byte(c), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	return root
}

// TestMaxDisk: package.yao's sandbox.max_disk wins over app.jsonc's,
// which wins over DefaultDisk; bad values are positioned problems.
func TestMaxDisk(t *testing.T) {
	t.Parallel()
	app, err := Load(writeDiskApp(t, "", "50g"))
	if err != nil {
		t.Fatal(err)
	}
	if a, b := app.Assistants["a"].Sandbox.DiskBytes, app.Assistants["b"].Sandbox.DiskBytes; a != 50<<30 || b != DefaultDisk {
		t.Errorf("without app.jsonc: a %d, b %d", a, b)
	}
	if app.Config.Sandbox.DiskBytes != DefaultDisk {
		t.Errorf("default: %d", app.Config.Sandbox.DiskBytes)
	}
	app, err = Load(writeDiskApp(t, `{"sandbox": {"max_disk": "2g"}}`, "50g"))
	if err != nil {
		t.Fatal(err)
	}
	if a, b := app.Assistants["a"].Sandbox.DiskBytes, app.Assistants["b"].Sandbox.DiskBytes; a != 50<<30 || b != 2<<30 {
		t.Errorf("with app.jsonc 2g: a %d, b %d", a, b)
	}
	_, err = Load(writeDiskApp(t, `{"sandbox": {"max_disk": "lots"}}`, "1m"))
	for _, want := range []string{
		`app.jsonc:1:26: sandbox.max_disk: invalid size "lots"`,
		`assistants/a/package.yao:1:70: sandbox.max_disk: size "1m" is out of range: want 32m to 16t`,
	} {
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("problems %v, want %q", err, want)
		}
	}
}
