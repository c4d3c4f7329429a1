package main

import (
	"bytes"
	"context"
	"encoding/json"
	"encoding/xml"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/agentbox/agentbox/internal/testenv"
)

// testApp copies testdata/apps/agenttest (an app whose direct assistants
// answer from scripted models) into a temp folder.
func testApp(t *testing.T) string {
	t.Helper()
	dst := filepath.Join(t.TempDir(), "app")
	if err := os.CopyFS(dst, os.DirFS(filepath.Join(testenv.RepoRoot(), "testdata", "apps", "agenttest"))); err != nil {
		t.Fatal(err)
	}
	return dst
}

func runTestCmd(t *testing.T, args ...string) (int, string, string) {
	t.Helper()
	var out, errb bytes.Buffer
	code := runTest(context.Background(), args, &out, &errb)
	return code, out.String(), errb.String()
}

func TestTestUsageErrors(t *testing.T) {
	app := testApp(t)
	tests := []struct {
		args []string
		want string
	}{
		{[]string{"--timeout", "soon"}, `--timeout "soon": want a duration`},
		{[]string{"--runs", "0"}, "--runs 0: want 1 or more"},
		{[]string{"--parallel", "0"}, "--parallel 0: want 1 or more"},
		{[]string{"--run", "("}, `--run "(":`},
		{[]string{"-o", "report.pdf"}, `unknown format ".pdf"`},
		{[]string{"--ctx", "/nonexistent.json"}, "--ctx: context file"},
		{[]string{"-n", "nobody"}, `unknown assistant "nobody"`},
		{[]string{"-n", "greeter", "-i", "hi", "-c", "nope.x"}, `connector "nope.x" does not exist`},
		{[]string{"--scripts", "format"}, "--scripts needs -n"},
		{[]string{"extra"}, `unexpected argument "extra"`},
		{[]string{"--bogus"}, "flag provided but not defined"},
		{[]string{"-i", "Hello"}, "is a message: name the assistant"},
	}
	for _, tt := range tests {
		code, _, errs := runTestCmd(t, append([]string{"--app", app}, tt.args...)...)
		if code != 2 || !strings.Contains(errs, tt.want) {
			t.Errorf("test %v = %d %q, want 2 and %q", tt.args, code, errs, tt.want)
		}
	}
	if code, _, errs := runTestCmd(t, "--app", "/nonexistent/app"); code != 2 || !strings.Contains(errs, "load app") {
		t.Errorf("missing app = %d %q", code, errs)
	}
}

func TestTestPasses(t *testing.T) {
	app := testApp(t)
	dir := t.TempDir()
	out := func(name string) string { return filepath.Join(dir, name) }
	code, stdout, stderr := runTestCmd(t, "--app", app, "-i", "assistants/greeter/tests/inputs.jsonl", "--parallel", "3",
		"-o", out("r.html"), "-o", out("r.jsonl"), "-o", out("r.xml"), "--output", out("r.md"), "-o", out("r.json"))
	if code != 0 {
		t.Fatalf("exit %d\nstdout:\n%s\nstderr:\n%s", code, stdout, stderr)
	}
	for _, want := range []string{"▶ greeter: tests/inputs.jsonl (17 cases)", "PASSED  greets", "SKIPPED later", "16 passed · 1 skipped", "report: " + out("r.html"), "\nPASS\n"} {
		if !strings.Contains(stdout, want) {
			t.Errorf("stdout lacks %q:\n%s", want, stdout)
		}
	}
	if strings.Contains(stdout, "\x1b[") {
		t.Error("output that is not a terminal got ANSI codes")
	}
	jsonl, _ := os.ReadFile(out("r.jsonl"))
	lines := strings.Split(strings.TrimSpace(string(jsonl)), "\n")
	if len(lines) != 19 || !strings.HasPrefix(lines[0], `{"type":"start"`) || !strings.HasPrefix(lines[18], `{"type":"summary"`) {
		t.Errorf("JSONL report: %d lines, first %s", len(lines), lines[0])
	}
	var rep map[string]any
	b, _ := os.ReadFile(out("r.json"))
	if err := json.Unmarshal(b, &rep); err != nil || rep["summary"].(map[string]any)["passed"] != 16.0 {
		t.Errorf("JSON report: %v %v", err, rep["summary"])
	}
	var junit struct {
		Tests int `xml:"tests,attr"`
	}
	b, _ = os.ReadFile(out("r.xml"))
	if err := xml.Unmarshal(b, &junit); err != nil || junit.Tests != 17 {
		t.Errorf("JUnit: %v %d", err, junit.Tests)
	}
	for _, f := range []string{"r.html", "r.md"} {
		if st, err := os.Stat(out(f)); err != nil || st.Size() == 0 {
			t.Errorf("%s: %v", f, err)
		}
	}
}

func TestTestFails(t *testing.T) {
	app := testApp(t)
	code, stdout, _ := runTestCmd(t, "--app", app, "-i", "assistants/greeter/tests/negative/cases.jsonl", "--run", "^(contains|timeout|before-fails)$")
	if code != 1 {
		t.Fatalf("exit %d:\n%s", code, stdout)
	}
	for _, want := range []string{"FAILED  contains", `output does not contain "Goodbye"`, "TIMEOUT timeout", "ERROR   before-fails", "1 failed · 1 errors · 1 timed out", "\nFAIL\n"} {
		if !strings.Contains(stdout, want) {
			t.Errorf("stdout lacks %q:\n%s", want, stdout)
		}
	}
	// A suite that cannot run is not a failed test: exit 2.
	code, stdout, _ = runTestCmd(t, "--app", app, "-i", "assistants/greeter/tests/inputs.jsonl", "--before", "env_test.Nope")
	if code != 2 || !strings.Contains(stdout, "could not run: before-all env_test.Nope failed") {
		t.Errorf("before-all that fails = %d:\n%s", code, stdout)
	}
}

func TestTestStability(t *testing.T) {
	app := testApp(t)
	code, stdout, _ := runTestCmd(t, "--app", app, "-n", "flaky", "--runs", "4", "--parallel", "2")
	if code != 1 {
		t.Fatalf("exit %d:\n%s", code, stdout)
	}
	for _, want := range []string{"says-hello passed 2/4 runs (50%, unstable)", "always passed 4/4 runs (100%, stable)"} {
		if !strings.Contains(stdout, want) {
			t.Errorf("stdout lacks %q:\n%s", want, stdout)
		}
	}
}

func TestTestMessageJSONAndDryRun(t *testing.T) {
	app := testApp(t)
	code, stdout, stderr := runTestCmd(t, "--app", app, "-n", "greeter", "-i", "Hi there", "-c", "scripted.alt")
	if code != 0 || !strings.Contains(stdout, "Bonjour! Comment vous appelez-vous?") || !strings.Contains(stdout, "connector scripted.alt") {
		t.Errorf("message = %d\n%s\n%s", code, stdout, stderr)
	}
	code, stdout, _ = runTestCmd(t, "--app", app, "--json", "-n", "greeter", "--scripts", "format")
	if code != 0 {
		t.Fatalf("--json = %d", code)
	}
	var types []string
	for _, l := range strings.Split(strings.TrimSpace(stdout), "\n") {
		var e struct{ Type string }
		if err := json.Unmarshal([]byte(l), &e); err != nil {
			t.Fatalf("not JSON: %q", l)
		}
		types = append(types, e.Type)
	}
	if types[0] != "start" || types[len(types)-1] != "done" {
		t.Errorf("events = %v", types)
	}
	code, stdout, _ = runTestCmd(t, "--app", app, "--dry-run", "-n", "greeter", "--run", "^(greets|TestSlug)$")
	if code != 0 || !strings.Contains(stdout, `"id":"greets"`) || !strings.Contains(stdout, "  TestSlug") || strings.Contains(stdout, "regex") {
		t.Errorf("dry run = %d\n%s", code, stdout)
	}
}
