package sandbox

import (
	"context"
	"errors"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// patternReader yields n bytes without holding them.
type patternReader struct{ n int64 }

func (r *patternReader) Read(b []byte) (int, error) {
	if r.n <= 0 {
		return 0, io.EOF
	}
	k := min(int64(len(b)), r.n)
	for i := range b[:k] {
		b[i] = 'a' + byte(i%26)
	}
	r.n -= k
	return int(k), nil
}

// failingReader yields n bytes, then err.
type failingReader struct {
	n   int64
	err error
}

func (r *failingReader) Read(b []byte) (int, error) {
	if r.n <= 0 {
		return 0, r.err
	}
	k := min(int64(len(b)), r.n)
	r.n -= k
	return int(k), nil
}

// TestWriteFrom: a stream of any size is written atomically; a reader
// that fails, or a ctx that ends, leaves the old file and no temporary
// one.
func TestWriteFrom(t *testing.T) {
	t.Parallel()
	ws, _ := escapeFixture(t)
	ctx := context.Background()
	const size = 5*writeBuffer + 123
	n, err := ws.WriteFrom(ctx, "up/big.bin", &patternReader{n: size}, 0)
	if err != nil || n != size {
		t.Fatalf("WriteFrom = %d, %v", n, err)
	}
	if st, err := ws.Stat(ctx, "up/big.bin"); err != nil || st.Size != size {
		t.Fatalf("stat %+v, %v", st, err)
	}
	cut := errors.New("client went away")
	if _, err := ws.WriteFrom(ctx, "up/big.bin", &failingReader{n: 3 * writeBuffer, err: cut}, 0); !errors.Is(err, cut) {
		t.Errorf("failing reader: %v", err)
	}
	cctx, cancel := context.WithCancel(ctx)
	cancel()
	if _, err := ws.WriteFrom(cctx, "up/big.bin", &patternReader{n: 10}, 0); !errors.Is(err, context.Canceled) {
		t.Errorf("ended ctx: %v", err)
	}
	if st, _ := ws.Stat(ctx, "up/big.bin"); st.Size != size {
		t.Errorf("the old file changed: %d bytes", st.Size)
	}
	ents, _ := os.ReadDir(filepath.Join(ws.Dir(), "up"))
	if len(ents) != 1 {
		t.Errorf("temporary files left: %v", ents)
	}
	if n, err := ws.WriteFrom(ctx, "up/empty", strings.NewReader(""), 0); err != nil || n != 0 {
		t.Errorf("empty: %d, %v", n, err)
	}
}

// TestUserUsage: a user's workspaces, counted and measured; another
// user's are not theirs. Room says what a watched workspace may still
// take.
func TestUserUsage(t *testing.T) {
	t.Parallel()
	w, err := NewWorkspacesWith(t.TempDir(), WorkspacesOptions{UID: -1, GID: -1, Disk: DiskWatch})
	must(t, err)
	ctx := context.Background()
	if u, err := w.UserUsage(ctx, "nobody"); err != nil || u != (UserUsage{}) {
		t.Errorf("a user without workspaces: %+v, %v", u, err)
	}
	for _, c := range []string{"c1", "c2"} {
		ws, release, err := w.AcquireWith(ctx, "alice", c, AcquireOptions{MaxDisk: 4 << 20})
		must(t, err)
		if _, err := ws.WriteFrom(ctx, "f.bin", &patternReader{n: 1 << 20}, 0); err != nil {
			t.Fatal(err)
		}
		if room, limited, err := ws.Room(ctx); err != nil || !limited || room > 3<<20 || room < 2<<20 {
			t.Errorf("room of %s: %d %v %v", c, room, limited, err)
		}
		release()
	}
	_, releaseBob, err := w.Acquire(ctx, "bob", "c1")
	must(t, err)
	releaseBob()
	u, err := w.UserUsage(ctx, "alice")
	if err != nil || u.Workspaces != 2 || u.Bytes < 2<<20 || u.Bytes > 3<<20 {
		t.Errorf("alice: %+v, %v", u, err)
	}
	if !w.Exists("alice", "c1") || w.Exists("alice", "c3") || w.Exists("alice", "../bob") {
		t.Error("Exists")
	}
	if _, err := w.UserUsage(ctx, "../x"); !errors.Is(err, ErrInvalidID) {
		t.Errorf("bad user: %v", err)
	}
	ws, release, err := w.Acquire(ctx, "bob", "c1")
	must(t, err)
	defer release()
	if _, limited, err := ws.Room(ctx); limited || err != nil {
		t.Errorf("a workspace without a limit has room limited %v, %v", limited, err)
	}
	if n, err := w.DiskSize(); err != nil || n <= 0 {
		t.Errorf("DiskSize = %d, %v", n, err)
	}
}
