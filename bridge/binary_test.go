package bridge

import (
	"os"
	"path/filepath"
	"testing"
	"time"
)

// Copies are shared by content, reused, and the ones unused for a day go
// when a new one is made.
func TestExecuteOnlyCopies(t *testing.T) {
	t.Parallel()
	src, dir := t.TempDir(), filepath.Join(t.TempDir(), "agentbox-bin")
	write := func(name, content string) string {
		p := filepath.Join(src, name)
		if err := os.WriteFile(p, []byte(content), 0o755); err != nil {
			t.Fatal(err)
		}
		return p
	}
	a, err := executeOnly(write("a", "build one"), dir)
	if err != nil {
		t.Fatal(err)
	}
	if st, err := os.Stat(a); err != nil || st.Mode().Perm() != 0o711 || filepath.Dir(a) != dir {
		t.Fatalf("copy %s: %v %v", a, st, err)
	}
	if again, _ := executeOnly(write("a2", "build one"), dir); again != a {
		t.Fatalf("the same content got another copy: %s, %s", again, a)
	}
	old := time.Now().Add(-2 * copyMaxAge)
	if err := os.Chtimes(a, old, old); err != nil {
		t.Fatal(err)
	}
	stale := filepath.Join(dir, "agentbox-stale")
	if err := os.WriteFile(stale, []byte("x"), 0o711); err != nil {
		t.Fatal(err)
	}
	if err := os.Chtimes(stale, old, old); err != nil {
		t.Fatal(err)
	}
	// Reusing a copy marks it used.
	if again, _ := executeOnly(filepath.Join(src, "a"), dir); again != a {
		t.Fatalf("reuse: %s", again)
	}
	b, _ := executeOnly(write("b", "build two"), dir)
	if b == a {
		t.Fatal("another build shares a copy")
	}
	if _, err := os.Stat(stale); !os.IsNotExist(err) {
		t.Errorf("a copy unused for two days is still there: %v", err)
	}
	if _, err := os.Stat(a); err != nil {
		t.Errorf("a copy in use was removed: %v", err)
	}
}
