package sandbox

import (
	"strings"
	"testing"
	"time"
)

func TestRunAlive(t *testing.T) {
	t.Parallel()
	self := NewRunID()
	cases := []struct {
		run  string
		want bool
	}{
		{self, true},
		{"", true},                    // no label: only the grace period decides
		{"other-host/1/2/abcd", true}, // another host: cannot tell
	}
	for _, c := range cases {
		if got := RunAlive(c.run); got != c.want {
			t.Errorf("RunAlive(%q) = %v, want %v", c.run, got, c.want)
		}
	}
	// This process with another start time: a reused pid.
	parts := strings.Split(self, "/")
	parts[2] = "1"
	if RunAlive(strings.Join(parts, "/")) {
		t.Errorf("a reused pid (start time differs) counts as alive")
	}
}

func TestOrphaned(t *testing.T) {
	t.Parallel()
	now := time.Date(2025, 6, 1, 12, 0, 0, 0, time.UTC)
	alive := func(run string) bool { return run != "dead" }
	cases := []struct {
		name string
		o    Owner
		want bool
	}{
		{"this run, untracked", Owner{Instance: "i", Run: "self", Created: now}, true},
		{"owner gone", Owner{Instance: "other", Run: "dead", Created: now}, true},
		{"live owner, young", Owner{Instance: "other", Run: "live", Created: now.Add(-time.Minute)}, false},
		{"live owner, past the grace", Owner{Instance: "other", Run: "live", Created: now.Add(-2 * time.Hour)}, true},
	}
	for _, c := range cases {
		reason, got := Orphaned(c.o, "self", now, time.Hour, alive)
		if got != c.want || got && reason == "" {
			t.Errorf("%s: Orphaned = %q, %v; want %v with a reason", c.name, reason, got, c.want)
		}
	}
}
