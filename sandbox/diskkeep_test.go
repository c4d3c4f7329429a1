package sandbox

import (
	"context"
	"fmt"
	"path/filepath"
	"testing"
	"time"

	"github.com/agentbox/agentbox/internal/testenv"
)

// TestDiskKeepMounted: with KeepMounted an image stays mounted after its
// last release (the next turn reuses the mount), is unmounted once idle
// that long, and Close unmounts what is still kept. Another process's
// mount of a workspace used just now is adopted by Recover, not cut.
func TestDiskKeepMounted(t *testing.T) {
	t.Parallel()
	testenv.LoopDisks(t)
	const keep = 300 * time.Millisecond
	w, err := NewWorkspacesWith(t.TempDir(), WorkspacesOptions{UID: -1, GID: -1, Disk: DiskLoop, KeepMounted: keep})
	must(t, err)
	defer func() {
		must(t, w.Close(context.Background()))
		if l := waitLoopsGone(w.Root()); len(l) > 0 {
			t.Errorf("loop devices left: %v", l)
		}
	}()
	ctx := context.Background()
	dir := filepath.Join(w.Root(), "u", "c")
	_, release, err := w.AcquireWith(ctx, "u", "c", AcquireOptions{MaxDisk: testDisk})
	must(t, err)
	release()
	if !isMounted(t, dir) {
		t.Fatal("unmounted at once despite KeepMounted")
	}
	// Acquired again within the time: the pending unmount is cancelled.
	time.Sleep(keep / 2)
	ws, release, err := w.AcquireWith(ctx, "u", "c", AcquireOptions{MaxDisk: testDisk})
	must(t, err)
	time.Sleep(keep)
	if !isMounted(t, dir) {
		t.Fatal("unmounted under a live acquisition")
	}
	must(t, ws.WriteFile(ctx, "f", []byte("x"), 0))
	release()
	deadline := time.Now().Add(10 * time.Second)
	for isMounted(t, dir) {
		if time.Now().After(deadline) {
			t.Fatal("never unmounted after its keep time")
		}
		time.Sleep(20 * time.Millisecond)
	}
	// Close unmounts what is kept.
	_, release, err = w.AcquireWith(ctx, "u", "c", AcquireOptions{MaxDisk: testDisk})
	must(t, err)
	release()
	must(t, w.Close(ctx))
	if isMounted(t, dir) {
		t.Fatal("Close left a kept image mounted")
	}
	// What `agentbox run` leaves: mounted, used just now, no one holding it.
	must(t, mountImage(imagePath(w.Root(), "u", "c"), dir))
	touch(markerPath(w.Root(), "u", "c"))
	w2, err := NewWorkspacesWith(filepath.Dir(w.Root()), WorkspacesOptions{UID: -1, GID: -1, Disk: DiskLoop, KeepMounted: time.Hour})
	must(t, err)
	rep, err := w2.Recover(ctx)
	must(t, err)
	if len(rep.Unmounted) != 0 || !isMounted(t, dir) {
		t.Errorf("a mount used just now was not kept: %+v", rep)
	}
	must(t, w2.Close(ctx))
	if isMounted(t, dir) {
		t.Error("adopted mount not unmounted by Close")
	}
}

// TestDiskResizeWhileKept: a limit changed while the image is kept
// mounted between turns applies on the next turn.
func TestDiskResizeWhileKept(t *testing.T) {
	t.Parallel()
	testenv.LoopDisks(t)
	w, err := NewWorkspacesWith(t.TempDir(), WorkspacesOptions{UID: -1, GID: -1, Disk: DiskLoop, KeepMounted: time.Hour})
	must(t, err)
	defer func() { must(t, w.Close(context.Background())) }()
	ctx := context.Background()
	_, release, err := w.AcquireWith(ctx, "u", "c", AcquireOptions{MaxDisk: testDisk})
	must(t, err)
	release()
	ws, release, err := w.AcquireWith(ctx, "u", "c", AcquireOptions{MaxDisk: 2 * testDisk})
	must(t, err)
	defer release()
	if ws.Disk().Bytes != 2*testDisk || fsSize(t, ws.Dir()) <= testDisk*3/4 {
		t.Errorf("after a new limit: %+v, filesystem %d", ws.Disk(), fsSize(t, ws.Dir()))
	}
}

// BenchmarkAcquireRelease measures what a disk limit adds to a turn's
// workspace acquire and release: "limited" mounts and unmounts an
// existing 10 GiB image, "limited-new" also creates it (a chat's first
// turn), "limited-kept" finds it still mounted from the chat's last turn
// (KeepMounted, as serve runs). Compare each with "plain", in one run.
func BenchmarkAcquireRelease(b *testing.B) {
	for _, bc := range []struct {
		name  string
		mode  DiskMode
		limit int64
		fresh bool
		keep  time.Duration
	}{
		{"plain", DiskNone, 0, false, 0},
		{"limited", DiskLoop, 10 << 30, false, 0},
		{"limited-new", DiskLoop, 10 << 30, true, 0},
		{"limited-kept", DiskLoop, 10 << 30, false, time.Hour},
	} {
		b.Run(bc.name, func(b *testing.B) {
			if bc.mode == DiskLoop {
				testenv.LoopDisks(b)
			}
			w, err := NewWorkspacesWith(b.TempDir(), WorkspacesOptions{UID: -1, GID: -1, Disk: bc.mode, KeepMounted: bc.keep})
			must(b, err)
			b.Cleanup(func() { _ = w.Close(context.Background()) })
			ctx := context.Background()
			n := 0
			for b.Loop() {
				chat := "c"
				if bc.fresh {
					n++
					chat = fmt.Sprintf("c%d", n)
				}
				_, release, err := w.AcquireWith(ctx, "u", chat, AcquireOptions{MaxDisk: bc.limit})
				if err != nil {
					b.Fatal(err)
				}
				release()
			}
		})
	}
}
