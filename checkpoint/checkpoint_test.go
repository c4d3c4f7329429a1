package checkpoint

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"math/rand"
	"os"
	"path/filepath"
	"reflect"
	"sort"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"
)

var bg = context.Background()

func newStore(t testing.TB) *Store {
	t.Helper()
	s, err := Open(filepath.Join(t.TempDir(), "checkpoints"), Options{})
	if err != nil {
		t.Fatal(err)
	}
	return s
}

func write(t testing.TB, p string, data string) {
	t.Helper()
	if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(p, []byte(data), 0o644); err != nil {
		t.Fatal(err)
	}
}

// snapshot describes a folder as a restore must reproduce it: every
// entry's kind, mode, modification time, and content or link target.
func snapshot(t testing.TB, dir string) map[string]string {
	t.Helper()
	out := map[string]string{}
	err := filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(dir, p)
		if rel == "." {
			return nil
		}
		info, err := os.Lstat(p)
		if err != nil {
			return err
		}
		st := info.Sys().(*syscall.Stat_t)
		desc := fmt.Sprintf("%v uid=%d gid=%d", info.Mode(), st.Uid, st.Gid)
		switch {
		case info.Mode()&fs.ModeSymlink != 0:
			target, _ := os.Readlink(p)
			desc += " -> " + target
		case info.Mode().IsRegular():
			b, _ := os.ReadFile(p)
			desc += fmt.Sprintf(" mtime=%d %q", info.ModTime().UnixNano(), b)
		case info.IsDir():
			desc += fmt.Sprintf(" mtime=%d", info.ModTime().UnixNano())
		}
		out[rel] = desc
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return out
}

func diff(a, b map[string]string) string {
	var keys []string
	for k := range a {
		keys = append(keys, k)
	}
	for k := range b {
		if _, ok := a[k]; !ok {
			keys = append(keys, k)
		}
	}
	sort.Strings(keys)
	var sb strings.Builder
	for _, k := range keys {
		if a[k] != b[k] {
			d1, d2 := a[k], b[k]
			if len(d1) > 200 {
				d1 = d1[:200]
			}
			if len(d2) > 200 {
				d2 = d2[:200]
			}
			fmt.Fprintf(&sb, "%s:\n  want %s\n  got  %s\n", k, d1, d2)
		}
	}
	return sb.String()
}

// fill makes a workspace with a bit of everything a checkpoint keeps.
func fill(t testing.TB, dir string) {
	t.Helper()
	write(t, filepath.Join(dir, "README.md"), "# hello\n")
	write(t, filepath.Join(dir, "src/main.go"), "package main\n\nfunc main() {}\n")
	write(t, filepath.Join(dir, "src/deep/er/x.txt"), strings.Repeat("x", 10))
	big := make([]byte, 3*looseThreshold+17)
	rand.New(rand.NewSource(1)).Read(big)
	write(t, filepath.Join(dir, "data/random.bin"), string(big))
	write(t, filepath.Join(dir, "data/text.log"), strings.Repeat("a line of a log that compresses well\n", 20000))
	write(t, filepath.Join(dir, "empty"), "")
	must(t, os.MkdirAll(filepath.Join(dir, "emptydir"), 0o750))
	must(t, os.Symlink("src/main.go", filepath.Join(dir, "link")))
	must(t, os.Symlink("/etc/passwd", filepath.Join(dir, "abs-link")))
	must(t, os.Symlink("nowhere", filepath.Join(dir, "dangling")))
	must(t, os.Chmod(filepath.Join(dir, "src/main.go"), 0o755))
	must(t, os.Chmod(filepath.Join(dir, "data"), 0o711))
	write(t, filepath.Join(dir, ".agentbox/claude/session.jsonl"), `{"turn":1}`+"\n")
	old := time.Date(2020, 1, 2, 3, 4, 5, 6, time.UTC)
	must(t, os.Chtimes(filepath.Join(dir, "README.md"), old, old))
	must(t, os.Chtimes(filepath.Join(dir, "emptydir"), old, old))
}

func must(t testing.TB, err error) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
}

func snap(t testing.TB, s *Store, user, chat, dir string, mem map[string]json.RawMessage) *Checkpoint {
	t.Helper()
	cp, done, err := s.Capture(bg, user, chat, Source{Dir: dir, Memory: mem})
	if err != nil {
		t.Fatal(err)
	}
	done()
	return cp
}

func TestRoundTrip(t *testing.T) {
	t.Parallel()
	s := newStore(t)
	ws := filepath.Join(t.TempDir(), "ws")
	fill(t, ws)
	want := snapshot(t, ws)
	mem := map[string]json.RawMessage{"count": json.RawMessage(`1`), "name": json.RawMessage(`"x"`)}
	cp := snap(t, s, "alice", "c1", ws, mem)
	if cp.Files != 7 || cp.Read != cp.Bytes || cp.Added == 0 {
		t.Errorf("first capture = %+v: want 7 files, all read, something added", cp)
	}

	// The agent breaks everything.
	must(t, os.RemoveAll(filepath.Join(ws, "src")))
	write(t, filepath.Join(ws, "README.md"), "changed")
	write(t, filepath.Join(ws, "new.txt"), "new")
	must(t, os.Remove(filepath.Join(ws, "link")))
	must(t, os.Mkdir(filepath.Join(ws, "link"), 0o755))
	write(t, filepath.Join(ws, "link/inside"), "x")
	must(t, os.RemoveAll(filepath.Join(ws, "emptydir")))
	write(t, filepath.Join(ws, "emptydir"), "now a file")
	must(t, os.Remove(filepath.Join(ws, "empty")))
	must(t, os.Symlink("/", filepath.Join(ws, "empty")))
	must(t, os.Chmod(filepath.Join(ws, "data"), 0o500))

	got, err := s.Restore(bg, "alice", "c1", cp.ID, ws)
	if err != nil {
		t.Fatal(err)
	}
	if d := diff(want, snapshot(t, ws)); d != "" {
		t.Errorf("restored workspace differs:\n%s", d)
	}
	if got.Files != 7 || got.Bytes != cp.Bytes || got.Removed == 0 || got.Written == 0 {
		t.Errorf("restore = %+v", got)
	}
	if string(got.Memory["count"]) != "1" || string(got.Memory["name"]) != `"x"` || len(got.Memory) != 2 {
		t.Errorf("memory = %v", got.Memory)
	}

	// Restoring what is there writes nothing; capturing it again reads
	// nothing and is the same checkpoint.
	again, err := s.Restore(bg, "alice", "c1", cp.ID, ws)
	if err != nil {
		t.Fatal(err)
	}
	if again.Written != 0 || again.Removed != 0 {
		t.Errorf("second restore wrote %d, removed %d", again.Written, again.Removed)
	}
	cp2 := snap(t, s, "alice", "c1", ws, mem)
	if cp2.ID != cp.ID || cp2.Read != 0 || cp2.Added != 0 {
		t.Errorf("capture of the restored workspace = %+v, want id %s, nothing read or added", cp2, cp.ID)
	}
}

func TestIncremental(t *testing.T) {
	t.Parallel()
	s := newStore(t)
	s.racy = 0 // no file is recent enough to be read again
	ws := t.TempDir()
	fill(t, ws)
	first := snap(t, s, "u", "c", ws, nil)
	second := snap(t, s, "u", "c", ws, nil)
	if second.ID != first.ID || second.Added != 0 || second.Read != 0 {
		t.Errorf("unchanged capture = %+v, want id %s, nothing read or added", second, first.ID)
	}
	// One changed file: only it is read, and only it (and its trees) is
	// stored.
	write(t, filepath.Join(ws, "src/main.go"), "package main // changed\n")
	third := snap(t, s, "u", "c", ws, nil)
	if third.ID == second.ID {
		t.Fatal("a changed file did not change the checkpoint")
	}
	if third.Read != int64(len("package main // changed\n")) {
		t.Errorf("read %d bytes after a one-file change", third.Read)
	}
	if third.Added > 2048 {
		t.Errorf("a one-line change stored %d bytes", third.Added)
	}
}

func TestRacyFileReadAgain(t *testing.T) {
	t.Parallel()
	s := newStore(t)
	ws := t.TempDir()
	p := filepath.Join(ws, "f")
	write(t, p, "aaaa")
	st, _ := os.Stat(p)
	first := snap(t, s, "u", "c", ws, nil)
	// Same size and mtime, changed content (a write within one clock
	// tick looks like this): the file was racy, so it is read again.
	write(t, p, "bbbb")
	must(t, os.Chtimes(p, st.ModTime(), st.ModTime()))
	second := snap(t, s, "u", "c", ws, nil)
	if second.ID == first.ID {
		t.Fatal("a file changed within the racy window was not read again")
	}
}

func TestMemoryOnly(t *testing.T) {
	t.Parallel()
	s := newStore(t)
	a := snap(t, s, "u", "c", "", map[string]json.RawMessage{"k": json.RawMessage(` { "a" : 1 } `)})
	b := snap(t, s, "u", "c", "", map[string]json.RawMessage{"k": json.RawMessage(`{"a":1}`)})
	if a.ID != b.ID {
		t.Error("the same memory, formatted differently, made two checkpoints")
	}
	st, err := s.State(bg, "u", a.ID)
	if err != nil {
		t.Fatal(err)
	}
	if string(st.Memory["k"]) != `{"a":1}` || st.History != nil {
		t.Errorf("memory = %s, history %q", st.Memory["k"], st.History)
	}
	empty := snap(t, s, "u", "c", "", nil)
	if st, err := s.State(bg, "u", empty.ID); err != nil || len(st.Memory) != 0 {
		t.Errorf("empty memory = %v, %v", st, err)
	}
	cp, done, err := s.Capture(bg, "u", "c", Source{History: []byte(`[{"role":"user","content":"hi"}]`)})
	if err != nil {
		t.Fatal(err)
	}
	done()
	if st, err := s.State(bg, "u", cp.ID); err != nil || string(st.History) != `[{"role":"user","content":"hi"}]` {
		t.Errorf("history = %q, %v", st.History, err)
	}
}

func TestForkIntoAnotherFolder(t *testing.T) {
	t.Parallel()
	s := newStore(t)
	ws := t.TempDir()
	fill(t, ws)
	want := snapshot(t, ws)
	cp := snap(t, s, "u", "parent", ws, nil)
	fork := filepath.Join(t.TempDir(), "fork")
	must(t, os.Mkdir(fork, 0o700))
	if _, err := s.Restore(bg, "u", "child", cp.ID, fork); err != nil {
		t.Fatal(err)
	}
	if d := diff(want, snapshot(t, fork)); d != "" {
		t.Errorf("fork differs:\n%s", d)
	}
	// The fork's index is its own: its first capture reads nothing and
	// adds nothing; a change there leaves the parent alone.
	c := snap(t, s, "u", "child", fork, nil)
	if c.ID != cp.ID || c.Added != 0 {
		t.Errorf("fork's capture = %+v", c)
	}
	write(t, filepath.Join(fork, "README.md"), "fork only")
	if d := diff(want, snapshot(t, ws)); d != "" {
		t.Errorf("parent changed with its fork:\n%s", d)
	}
}

func TestRestoreNeverLeavesTheWorkspace(t *testing.T) {
	t.Parallel()
	s := newStore(t)
	ws := t.TempDir()
	write(t, filepath.Join(ws, "sub/file"), "mine")
	cp := snap(t, s, "u", "c", ws, nil)
	// The agent replaces the folder by a link to a folder outside.
	outside := t.TempDir()
	write(t, filepath.Join(outside, "keep"), "outside")
	must(t, os.RemoveAll(filepath.Join(ws, "sub")))
	must(t, os.Symlink(outside, filepath.Join(ws, "sub")))
	if _, err := s.Restore(bg, "u", "c", cp.ID, ws); err != nil {
		t.Fatal(err)
	}
	if b, err := os.ReadFile(filepath.Join(outside, "keep")); err != nil || string(b) != "outside" {
		t.Errorf("the folder outside was touched: %q, %v", b, err)
	}
	if _, err := os.Stat(filepath.Join(outside, "file")); err == nil {
		t.Error("restore wrote through the agent's link")
	}
	if fi, err := os.Lstat(filepath.Join(ws, "sub")); err != nil || !fi.IsDir() {
		t.Errorf("sub is not a folder again: %v", err)
	}
	// A capture records links as links: the content behind them is
	// never read.
	must(t, os.Symlink(outside, filepath.Join(ws, "out")))
	cp2 := snap(t, s, "u", "c", ws, nil)
	if cp2.Files != 1 {
		t.Errorf("capture followed a link: %d files", cp2.Files)
	}
}

func TestSpecialFilesSkipped(t *testing.T) {
	t.Parallel()
	s := newStore(t)
	ws := t.TempDir()
	write(t, filepath.Join(ws, "a"), "a")
	must(t, syscall.Mkfifo(filepath.Join(ws, "fifo"), 0o644))
	done := make(chan *Checkpoint, 1)
	go func() { done <- snap(t, s, "u", "c", ws, nil) }()
	select {
	case cp := <-done:
		if cp.Files != 1 || cp.Skipped != 1 {
			t.Errorf("capture = %+v: want 1 file, 1 skipped", cp)
		}
	case <-time.After(time.Minute):
		t.Fatal("capture blocked on a FIFO")
	}
}

func TestCorruptObjectDetected(t *testing.T) {
	t.Parallel()
	s := newStore(t)
	ws := t.TempDir()
	big := bytes.Repeat([]byte("0123456789abcdef"), looseThreshold)
	write(t, filepath.Join(ws, "big"), string(big))
	cp := snap(t, s, "u", "c", ws, nil)
	var loose []string
	_ = filepath.WalkDir(filepath.Join(s.Root(), "u", dirObjects), func(p string, d fs.DirEntry, err error) error {
		if err == nil && d.Type().IsRegular() {
			loose = append(loose, p)
		}
		return nil
	})
	if len(loose) != 1 {
		t.Fatalf("loose objects: %v", loose)
	}
	// Another object's bytes under this name.
	rec := encode(typeBlob, bytes.Repeat([]byte("x"), len(big)))
	must(t, os.WriteFile(loose[0], rec, 0o600))
	must(t, os.Remove(filepath.Join(ws, "big")))
	_, err := s.Restore(bg, "u", "c", cp.ID, ws)
	if !errors.Is(err, ErrCorrupt) {
		t.Fatalf("restore of a corrupt object: %v, want ErrCorrupt", err)
	}
}

func TestCollect(t *testing.T) {
	t.Parallel()
	s := newStore(t)
	ws := t.TempDir()
	big := make([]byte, 4*looseThreshold)
	rand.New(rand.NewSource(3)).Read(big)
	write(t, filepath.Join(ws, "big"), string(big))
	write(t, filepath.Join(ws, "small"), "one")
	c1 := snap(t, s, "u", "c", ws, nil)
	big[0] ^= 1
	write(t, filepath.Join(ws, "big"), string(big))
	write(t, filepath.Join(ws, "small"), "two")
	c2 := snap(t, s, "u", "c", ws, nil)
	before, _ := s.UserBytes(bg, "u")

	sizes, err := s.Sizes(bg, "u", []string{c2.ID, c1.ID})
	if err != nil {
		t.Fatal(err)
	}
	if sizes[0] < int64(len(big)) || sizes[1] < int64(len(big)) {
		t.Errorf("sizes = %v: each holds a big file of its own", sizes)
	}

	// Only c2 is a root (the index's base is c2 too): c1's objects go.
	col, err := s.Collect(bg, "u", func(context.Context) ([]string, error) { return []string{c2.ID}, nil })
	if err != nil {
		t.Fatal(err)
	}
	if col.Bytes < int64(len(big)) {
		t.Errorf("collected %+v, want at least c1's big file", col)
	}
	after, _ := s.UserBytes(bg, "u")
	if after >= before-int64(len(big)) {
		t.Errorf("store took %d bytes before, %d after", before, after)
	}
	if _, err := s.Restore(bg, "u", "c", c1.ID, ws); !errors.Is(err, ErrNotFound) {
		t.Errorf("restore of a collected checkpoint: %v", err)
	}
	if _, err := s.Restore(bg, "u", "c", c2.ID, t.TempDir()); err != nil {
		t.Errorf("restore of the kept checkpoint: %v", err)
	}

	// No roots, no index: everything goes.
	must(t, s.ForgetChat("u", "c"))
	if _, err := s.Collect(bg, "u", func(context.Context) ([]string, error) { return nil, nil }); err != nil {
		t.Fatal(err)
	}
	if _, err := s.Restore(bg, "u", "c", c2.ID, t.TempDir()); !errors.Is(err, ErrNotFound) {
		t.Errorf("restore after everything was collected: %v", err)
	}
}

func TestCollectKeepsPendingCaptures(t *testing.T) {
	t.Parallel()
	s := newStore(t)
	ws := t.TempDir()
	write(t, filepath.Join(ws, "f"), "content")
	cp, done, err := s.Capture(bg, "u", "c", Source{Dir: ws})
	if err != nil {
		t.Fatal(err)
	}
	must(t, s.ForgetChat("u", "c"))
	// Not recorded anywhere yet: pending, so kept.
	if _, err := s.Collect(bg, "u", func(context.Context) ([]string, error) { return nil, nil }); err != nil {
		t.Fatal(err)
	}
	if _, err := s.Restore(bg, "u", "c", cp.ID, t.TempDir()); err != nil {
		t.Fatalf("a pending checkpoint was collected: %v", err)
	}
	must(t, s.ForgetChat("u", "c")) // the restore made it the index's base
	done()
	if _, err := s.Collect(bg, "u", func(context.Context) ([]string, error) { return nil, nil }); err != nil {
		t.Fatal(err)
	}
	if _, err := s.Restore(bg, "u", "c2", cp.ID, t.TempDir()); !errors.Is(err, ErrNotFound) {
		t.Errorf("a dropped checkpoint was kept: %v", err)
	}
}

func TestConcurrentCapturesAndCollect(t *testing.T) {
	t.Parallel()
	s := newStore(t)
	const chats = 4
	var mu sync.Mutex
	roots := map[string]string{}
	var wg sync.WaitGroup
	for i := range chats {
		ws := t.TempDir()
		chat := fmt.Sprintf("c%d", i)
		wg.Go(func() {
			for j := range 10 {
				write(t, filepath.Join(ws, "f"), fmt.Sprintf("chat %d turn %d", i, j))
				write(t, filepath.Join(ws, "shared"), "the same in every chat")
				cp, done, err := s.Capture(bg, "u", chat, Source{Dir: ws})
				if err != nil {
					t.Error(err)
					return
				}
				mu.Lock()
				roots[chat] = cp.ID
				mu.Unlock()
				done()
			}
		})
	}
	for range 5 {
		wg.Go(func() {
			_, err := s.Collect(bg, "u", func(context.Context) ([]string, error) {
				mu.Lock()
				defer mu.Unlock()
				var out []string
				for _, id := range roots {
					out = append(out, id)
				}
				return out, nil
			})
			if err != nil {
				t.Error(err)
			}
		})
	}
	wg.Wait()
	for chat, id := range roots {
		dst := t.TempDir()
		if _, err := s.Restore(bg, "u", "check-"+chat, id, dst); err != nil {
			t.Errorf("%s's last checkpoint: %v", chat, err)
		}
	}
}

func TestRepack(t *testing.T) {
	t.Parallel()
	s := newStore(t)
	ws := t.TempDir()
	for i := range 50 {
		write(t, filepath.Join(ws, fmt.Sprintf("f%02d", i)), fmt.Sprintf("file %d %s", i, strings.Repeat("z", i*100)))
	}
	c1 := snap(t, s, "u", "c", ws, nil)
	// c2 keeps one file of c1's pack: the pack is mostly garbage.
	for i := 1; i < 50; i++ {
		must(t, os.Remove(filepath.Join(ws, fmt.Sprintf("f%02d", i))))
	}
	c2 := snap(t, s, "u", "c", ws, nil)
	if c1.ID == c2.ID {
		t.Fatal("removing files did not change the checkpoint")
	}
	col, err := s.Collect(bg, "u", func(context.Context) ([]string, error) { return []string{c2.ID}, nil })
	if err != nil {
		t.Fatal(err)
	}
	if col.Repacked != 1 {
		t.Errorf("collect = %+v, want one pack rewritten", col)
	}
	dst := t.TempDir()
	if _, err := s.Restore(bg, "u", "other", c2.ID, dst); err != nil {
		t.Fatal(err)
	}
	if b, err := os.ReadFile(filepath.Join(dst, "f00")); err != nil || string(b) != "file 0 " {
		t.Errorf("f00 after repack = %q, %v", b, err)
	}
}

func TestInvalidInput(t *testing.T) {
	t.Parallel()
	s := newStore(t)
	_, _, err1 := s.Capture(bg, "../x", "c", Source{})
	_, _, err2 := s.Capture(bg, "u", ".c", Source{})
	_, err3 := s.Restore(bg, "u", "c", "nothex", "")
	_, err4 := s.Restore(bg, "u", "c", strings.Repeat("ab", 32), "")
	_, _, err5 := s.Capture(bg, "u", "c", Source{Dir: filepath.Join(t.TempDir(), "missing")})
	for i, tc := range []struct {
		err, want error
	}{{err1, ErrInvalid}, {err2, ErrInvalid}, {err3, ErrInvalid}, {err4, ErrNotFound}, {err5, fs.ErrNotExist}} {
		if !errors.Is(tc.err, tc.want) {
			t.Errorf("case %d: %v, want %v", i, tc.err, tc.want)
		}
	}
}

func TestCanceled(t *testing.T) {
	t.Parallel()
	s := newStore(t)
	ws := t.TempDir()
	fill(t, ws)
	ctx, cancel := context.WithCancel(bg)
	cancel()
	if _, _, err := s.Capture(ctx, "u", "c", Source{Dir: ws}); !errors.Is(err, context.Canceled) {
		t.Errorf("capture with a canceled context: %v", err)
	}
}

func FuzzDecodeTree(f *testing.F) {
	f.Add(encodeTree([]entry{{name: "a", kind: kindFile, perm: 0o644, size: 3}, {name: "b", kind: kindSymlink, link: "a"}, {name: "c", kind: kindDir}}))
	f.Add([]byte{1, 0})
	f.Fuzz(func(t *testing.T, data []byte) {
		entries, err := decodeTree(data)
		if err != nil {
			return
		}
		// What decodes survives an encoding round trip.
		again, err := decodeTree(encodeTree(append([]entry(nil), entries...)))
		if err != nil || !reflect.DeepEqual(again, entries) {
			t.Errorf("re-encoded tree differs: %v", err)
		}
	})
}

// BenchmarkCaptureSmallChange measures a turn's checkpoint: a workspace of
// the given size (files of 1 MiB across folders, already checkpointed) in
// which one file changed. It reports the bytes the store grew by per turn.
// AGENTBOX_BENCH_WORKSPACE_MIB sets the size (default 256).
func BenchmarkCaptureSmallChange(b *testing.B) {
	s, ws, mib := benchWorkspace(b)
	before, _ := s.UserBytes(bg, "u")
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		write(b, filepath.Join(ws, "d00/notes.md"), fmt.Sprintf("turn %d\n", i))
		snap(b, s, "u", "c", ws, nil)
	}
	b.StopTimer()
	after, _ := s.UserBytes(bg, "u")
	b.ReportMetric(float64(after-before)/float64(b.N), "disk-B/turn")
	b.ReportMetric(float64(mib), "workspace-MiB")
}

// BenchmarkCaptureUnchanged measures the checkpoint of the state a turn
// starts from when nothing changed since the last one (the pipeline's
// Before capture): the same checkpoint again, nothing stored.
func BenchmarkCaptureUnchanged(b *testing.B) {
	s, ws, mib := benchWorkspace(b)
	before, _ := s.UserBytes(bg, "u")
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		snap(b, s, "u", "c", ws, nil)
	}
	b.StopTimer()
	after, _ := s.UserBytes(bg, "u")
	b.ReportMetric(float64(after-before)/float64(b.N), "disk-B/turn")
	b.ReportMetric(float64(mib), "workspace-MiB")
}

// benchWorkspace is a workspace of AGENTBOX_BENCH_WORKSPACE_MIB (default
// 256) files of 1 MiB across folders, checkpointed once.
func benchWorkspace(b *testing.B) (*Store, string, int) {
	mib := 256
	if v := os.Getenv("AGENTBOX_BENCH_WORKSPACE_MIB"); v != "" {
		if _, err := fmt.Sscan(v, &mib); err != nil || mib < 1 {
			b.Fatalf("AGENTBOX_BENCH_WORKSPACE_MIB=%q: want a positive number", v)
		}
	}
	s := newStore(b)
	ws := b.TempDir()
	rng := rand.New(rand.NewSource(7))
	buf := make([]byte, 1<<20)
	for i := 0; i < mib; i++ {
		rng.Read(buf)
		write(b, filepath.Join(ws, fmt.Sprintf("d%02d/f%04d.bin", i%32, i)), string(buf))
	}
	s.racy = 0
	snap(b, s, "u", "c", ws, nil)
	return s, ws, mib
}
