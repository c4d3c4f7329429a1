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
	left, err := filepath.Glob(filepath.Join(dir, "agentbox-*"))
	if err != nil {
		t.Fatal(err)
	}
	if len(left) != maxCopies {
		t.Errorf("%d copies after %d builds, want %d", len(left), len(copies), maxCopies)
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

// A content key is kept on disk by the binary's identity: the next process
// reads it instead of hashing the binary, and a build written over the
// binary, even of the same size and modification time, is hashed anew.
func TestContentKeyKept(t *testing.T) {
	src, dir := t.TempDir(), filepath.Join(t.TempDir(), "agentbox-bin")
	bin := filepath.Join(src, "agentbox")
	if err := os.WriteFile(bin, []byte("build one"), 0o755); err != nil {
		t.Fatal(err)
	}
	a, err := mountedBinary(bin, dir, false)
	if err != nil {
		t.Fatal(err)
	}
	keys, _ := filepath.Glob(filepath.Join(dir, keyPrefix+"*"))
	if len(keys) != 1 {
		t.Fatalf("content keys kept: %v, want one", keys)
	}
	// A new process: nothing cached in memory. The key read from disk
	// names the same copy; a wrong key there would name another.
	contentKeys.Clear()
	if err := os.WriteFile(keys[0], []byte("0123456789abcdef01234567"), 0o600); err != nil {
		t.Fatal(err)
	}
	if again, _ := mountedBinary(bin, dir, false); again != filepath.Join(dir, "agentbox-0123456789abcdef01234567") {
		t.Fatalf("the kept key was not used: %s", again)
	}
	// Overwritten in place with the same size and times: its change time
	// moved, so it is hashed and gets its own copy.
	st, err := os.Stat(bin)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(bin, []byte("build two"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.Chtimes(bin, st.ModTime(), st.ModTime()); err != nil {
		t.Fatal(err)
	}
	stale := filepath.Join(dir, keyPrefix+"stale")
	if err := os.WriteFile(stale, []byte("0123456789abcdef01234567"), 0o600); err != nil {
		t.Fatal(err)
	}
	old := time.Now().Add(-2 * copyMaxAge)
	if err := os.Chtimes(stale, old, old); err != nil {
		t.Fatal(err)
	}
	contentKeys.Clear()
	b, err := mountedBinary(bin, dir, false)
	if err != nil {
		t.Fatal(err)
	}
	if b == a || filepath.Dir(b) != dir {
		t.Fatalf("the new build got copy %s, the old one %s", b, a)
	}
	if got, _ := os.ReadFile(b); string(got) != "build two" {
		t.Fatalf("the new build's copy holds %q", got)
	}
	if _, err := os.Stat(stale); !os.IsNotExist(err) {
		t.Errorf("a key unread for two days is still there: %v", err)
	}
	// A key file that is not a key is hashed over.
	keys, _ = filepath.Glob(filepath.Join(dir, keyPrefix+"*"))
	for _, k := range keys {
		if err := os.WriteFile(k, []byte("../../etc/passwd"), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	contentKeys.Clear()
	if again, _ := mountedBinary(bin, dir, false); again != b {
		t.Fatalf("a broken key file: %s, want %s", again, b)
	}
}
