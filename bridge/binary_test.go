package bridge

import (
	"fmt"
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
	a, err := mountedBinary(write("a", "build one"), dir, false)
	if err != nil {
		t.Fatal(err)
	}
	if st, err := os.Stat(a); err != nil || st.Mode().Perm() != 0o711 || filepath.Dir(a) != dir {
		t.Fatalf("copy %s: %v %v", a, st, err)
	}
	if again, _ := mountedBinary(write("a2", "build one"), dir, false); again != a {
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
	if again, _ := mountedBinary(filepath.Join(src, "a"), dir, false); again != a {
		t.Fatalf("reuse: %s", again)
	}
	b, _ := mountedBinary(write("b", "build two"), dir, false)
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

// However many builds come and go, at most maxCopies copies stay: the least
// recently used go first.
func TestCopiesAreBounded(t *testing.T) {
	t.Parallel()
	src, dir := t.TempDir(), filepath.Join(t.TempDir(), "agentbox-bin")
	var copies []string
	for i := range maxCopies + 3 {
		p := filepath.Join(src, "build")
		if err := os.WriteFile(p, []byte(fmt.Sprint("build ", i)), 0o755); err != nil {
			t.Fatal(err)
		}
		c, err := mountedBinary(p, dir, false)
		if err != nil {
			t.Fatal(err)
		}
		// Each an hour apart, the newest now.
		used := time.Now().Add(time.Duration(i-maxCopies-3) * time.Hour)
		if err := os.Chtimes(c, used, used); err != nil {
			t.Fatal(err)
		}
		copies = append(copies, c)
	}
	entries, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	if len(entries) != maxCopies {
		t.Errorf("%d copies after %d builds, want %d", len(entries), len(copies), maxCopies)
	}
	for _, c := range copies[len(copies)-maxCopies:] {
		if _, err := os.Stat(c); err != nil {
			t.Errorf("a recently used copy was removed: %v", err)
		}
	}
}

// With readable (gVisor's sandboxes), a binary others may read and run is
// mounted as it is, and one they may not gets a 0755 copy of its own.
func TestReadableBinary(t *testing.T) {
	t.Parallel()
	src, dir := t.TempDir(), filepath.Join(t.TempDir(), "agentbox-bin")
	open := filepath.Join(src, "open")
	if err := os.WriteFile(open, []byte("build one"), 0o755); err != nil {
		t.Fatal(err)
	}
	if got, err := mountedBinary(open, dir, true); err != nil || got != open {
		t.Errorf("a readable binary: %s, %v; want it as it is", got, err)
	}
	closed := filepath.Join(src, "closed")
	if err := os.WriteFile(closed, []byte("build one"), 0o700); err != nil {
		t.Fatal(err)
	}
	got, err := mountedBinary(closed, dir, true)
	if err != nil {
		t.Fatal(err)
	}
	if st, err := os.Stat(got); err != nil || st.Mode().Perm() != 0o755 || filepath.Dir(got) != dir {
		t.Errorf("copy %s: %v %v; want a 0755 copy in %s", got, st, err, dir)
	}
	if eo, _ := mountedBinary(closed, dir, false); eo != closed {
		t.Errorf("execute-only of a binary others cannot read: %s, want it as it is", eo)
	}
}
