package owner

import (
	"os"
	"os/exec"
	"strconv"
	"strings"
	"testing"
)

func TestAlive(t *testing.T) {
	t.Parallel()
	self := Self()
	if parts := strings.Split(self, "/"); len(parts) != 3 || parts[2] == "" {
		t.Fatalf("Self() = %q", self)
	}
	host, _ := os.Hostname()
	cmd := exec.Command("true")
	if err := cmd.Run(); err != nil {
		t.Fatal(err)
	}
	dead := host + "/" + strconv.Itoa(cmd.Process.Pid) + "/1"
	cases := []struct {
		id   string
		want bool
	}{
		{self, true},
		{"", true},                  // unreadable: cannot tell
		{"other-host/1/2", true},    // another host: cannot tell
		{host + "/notapid/1", true}, // unreadable
		{dead, false},               // an exited process
		{"a/b/c/d", true},           // another format
	}
	for _, c := range cases {
		if got := Alive(c.id); got != c.want {
			t.Errorf("Alive(%q) = %v, want %v", c.id, got, c.want)
		}
	}
	// This process with another start time: a reused pid.
	parts := strings.Split(self, "/")
	parts[2] = "1"
	if Alive(strings.Join(parts, "/")) {
		t.Error("a reused pid (start time differs) counts as alive")
	}
}
