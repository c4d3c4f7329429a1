package bridge

import (
	"os"
	"os/exec"
	"path/filepath"
	"testing"
	"time"

	"github.com/agentbox/agentbox/internal/owner"
)

// TestCleanStale: session folders of dead processes go; this process's,
// a live process's and young ownerless ones stay.
func TestCleanStale(t *testing.T) {
	parent := shortTempDir(t)
	mine := startSession(t, Options{Dir: parent, Upstream: testUpstream("http://127.0.0.1:1")})

	dead := exec.Command("true")
	if err := dead.Run(); err != nil {
		t.Fatal(err)
	}
	live := exec.Command("sleep", "60")
	if err := live.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { live.Process.Kill(); live.Wait() })

	mk := func(name, ownerID string, age time.Duration) {
		d := filepath.Join(parent, name)
		if err := os.Mkdir(d, 0o700); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(d, "model.sock"), nil, 0o600); err != nil {
			t.Fatal(err)
		}
		if ownerID != "" {
			if err := os.WriteFile(filepath.Join(d, ownerFile), []byte(ownerID+"\n"), 0o600); err != nil {
				t.Fatal(err)
			}
		}
		old := time.Now().Add(-age)
		if err := os.Chtimes(d, old, old); err != nil {
			t.Fatal(err)
		}
	}
	mk("dead", owner.Of(dead.Process.Pid), 0)
	mk("live", owner.Of(live.Process.Pid), 48*time.Hour)
	mk("orphan-young", "", time.Minute)
	mk("orphan-old", "", 25*time.Hour)
	mk("other-host", "elsewhere/1/2", 48*time.Hour)

	removed, err := CleanStale(parent, 0, nil)
	if err != nil {
		t.Fatal(err)
	}
	if got := len(removed); got != 2 || removed[0] != "dead" || removed[1] != "orphan-old" {
		t.Fatalf("removed %v, want [dead orphan-old]", removed)
	}
	for _, keep := range []string{filepath.Base(mine.Dir()), "live", "orphan-young", "other-host"} {
		if _, err := os.Stat(filepath.Join(parent, keep)); err != nil {
			t.Errorf("%s was removed: %v", keep, err)
		}
	}
	// The owner file names this process.
	b, err := os.ReadFile(filepath.Join(mine.Dir(), ownerFile))
	if err != nil || string(b) != owner.Self()+"\n" {
		t.Errorf("owner file = %q, %v", b, err)
	}
	if removed, err := CleanStale(filepath.Join(parent, "missing"), 0, nil); err != nil || removed != nil {
		t.Errorf("missing parent: %v %v", removed, err)
	}
}
