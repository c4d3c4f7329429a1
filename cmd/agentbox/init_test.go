package main

import (
	"bytes"
	"context"
	"path/filepath"
	"strings"
	"testing"
)

// TestInit writes an app that loads with no problem and answers a turn
// offline, and never overwrites an app that is there.
func TestInit(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "myapp")
	var out, errb bytes.Buffer
	if code := runInit(context.Background(), []string{dir}, &out, &errb); code != 0 {
		t.Fatalf("init = %d: %s", code, errb.String())
	}
	if !strings.Contains(out.String(), "next: cd "+dir+" && agentbox run hello") {
		t.Errorf("output:\n%s", out.String())
	}
	r, _, err := check(dir)
	if err != nil || len(r.Problems) > 0 {
		t.Fatalf("check: %v %v", err, r.Problems)
	}
	out.Reset()
	if code := runRun(context.Background(), []string{"--app", dir, "hello", "Hi"}, &out, &errb); code != 0 || !strings.Contains(out.String(), "Hello! I answer from a script") {
		t.Fatalf("run = %d\n%s\n%s", code, out.String(), errb.String())
	}
	errb.Reset()
	if code := runInit(context.Background(), []string{dir}, &out, &errb); code != 1 || !strings.Contains(errb.String(), "nothing written") {
		t.Errorf("init again = %d: %s", code, errb.String())
	}
}
