package main

import (
	"strings"
	"testing"

	"github.com/agentbox/agentbox/internal/testenv"
)

func TestSpinner(t *testing.T) {
	t.Parallel()
	var buf testenv.SyncBuffer
	s := newSpinner(&buf)
	s.Start("starting sandbox…")
	s.Start("still starting")
	s.Stop()
	s.Stop()
	var nilSpinner *spinner
	nilSpinner.Start("x")
	nilSpinner.Stop()
	out := buf.String()
	if !strings.Contains(out, "starting sandbox…") && !strings.Contains(out, "still starting") || !strings.HasSuffix(out, "\r\x1b[K") {
		t.Errorf("spinner output %q", out)
	}
}
