// Package checkpoint records and restores the states of chats: a chat's
// workspace files and its hook memory, after (and before) each of its
// turns, so that a chat can be rewound to an earlier turn or forked from
// it. The CLIs keep their sessions in the workspace's state folder
// (.agentbox/), so a workspace's checkpoint holds the agent's session too.
//
// A Store keeps every user's checkpoints under one folder
// ({dataRoot}/checkpoints/{user}/), content-addressed and deduplicated:
// each file's content, each folder's listing (a tree) and each memory
// snapshot is an object named by the SHA-256 of its type and bytes, stored
// once however many checkpoints, chats and forks of the user hold it, and
// compressed (zstd) when that saves space. A checkpoint is a small commit
// object naming a tree and a memory snapshot; its id is that object's
// hash, so a state recorded twice is one checkpoint.
//
// Capture costs what changed, not what the workspace holds: a per-chat
// index remembers each file's inode, size, modification and change times
// and content hash, so a file whose stat is unchanged is not read again
// (as git's index does; a file changed within a second before a capture is
// read again at the next one, since its times may not show a later write).
// Small objects of one capture go into one pack file, large files into
// objects of their own; the first checkpoint of a chat stores its
// workspace once, compressed, and every later one only the changed files
// and the trees on their paths.
//
// The method works on any folder (a loop-mounted ext4 image, a plain
// folder, a Kubernetes volume the server mounts), needs no filesystem
// support, and touches the workspace only through file descriptors: every
// open, stat and write is relative to an open folder and never follows a
// symbolic link, so an agent that swaps folders for links while a capture
// or restore runs can only make the result inexact, never make it read or
// write outside the workspace. Regular files, folders and symbolic links
// are recorded with their permissions, owner and modification time; FIFOs,
// sockets, devices and other filesystems mounted inside are not (Skipped
// counts them), and hard links are restored as separate files.
//
// Objects no checkpoint refers to are removed by Collect (a mark and
// sweep over the user's objects, under the user's exclusive lock; captures
// and restores hold it shared). A Store is safe for concurrent use, also
// by several processes sharing the folder.
package checkpoint

import (
	"container/list"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io/fs"
	"log/slog"
	"os"
	"path/filepath"
	"sync"
	"syscall"
	"time"

	"github.com/agentbox/agentbox/internal/flock"
	"github.com/agentbox/agentbox/sandbox"
)

// Errors returned by the Store. Match them with errors.Is.
var (
	// ErrNotFound: the checkpoint (or an object it refers to) is not in
	// the store: never recorded, or removed by retention.
	ErrNotFound = errors.New("checkpoint not found")
	// ErrInvalid marks bad input: an id that is no hash, a user or chat
	// id that is not a safe folder name.
	ErrInvalid = errors.New("invalid argument")
	// ErrCorrupt: an object's bytes do not match its name, or do not
	// decode.
	ErrCorrupt = errors.New("checkpoint store corrupt")
)

// Hash names an object: the SHA-256 of its type byte and its bytes.
type Hash [32]byte

// String is the hash in hex.
func (h Hash) String() string { return hex.EncodeToString(h[:]) }

// IsZero reports whether h is the zero hash (no object).
func (h Hash) IsZero() bool { return h == Hash{} }

// ParseHash parses a hash in hex.
func ParseHash(s string) (Hash, error) {
	var h Hash
	if len(s) != 2*len(h) {
		return h, fmt.Errorf("%w: checkpoint id %q is not 64 hex digits", ErrInvalid, s)
	}
	if _, err := hex.Decode(h[:], []byte(s)); err != nil {
		return h, fmt.Errorf("%w: checkpoint id %q is not hex", ErrInvalid, s)
	}
	return h, nil
}

// Object types: the first byte of what an object's hash covers.
const (
	typeBlob    byte = 'b' // a file's content
	typeTree    byte = 't' // a folder's entries
	typeCommit  byte = 'c' // a checkpoint: a tree and a memory snapshot
	typeMemory  byte = 'm' // a chat's hook memory, as a JSON object
	typeHistory byte = 'h' // a chat's history, as the caller encoded it
)

func hashOf(typ byte, data []byte) Hash {
	h := sha256.New()
	h.Write([]byte{typ})
	h.Write(data)
	var out Hash
	h.Sum(out[:0])
	return out
}

// Options configure a Store.
type Options struct {
	// Logger receives what cannot be returned (a pending root that could
	// not be removed, a pack that could not be read); nil: slog.Default().
	Logger *slog.Logger
	// CachedUsers bounds how many users' object indexes stay in memory
	// (0: 64).
	CachedUsers int
}

// Store is the checkpoint store of a data root. Create it with Open.
type Store struct {
	root string
	log  *slog.Logger
	max  int
	// racy is racyWindow (tests set 0).
	racy time.Duration

	// logMu serialises the changes of chats' logs in this process (a
	// chat's turns, rewinds and forks are serialised across processes by
	// its chat lock).
	logMu sync.Mutex

	mu    sync.Mutex
	users map[string]*list.Element // user -> element of lru holding *userStore
	lru   *list.List
}

// Open opens (creating when missing, mode 0700) the checkpoint store in the
// folder root ({dataRoot}/checkpoints).
func Open(root string, opts Options) (*Store, error) {
	if root == "" {
		return nil, fmt.Errorf("checkpoint store: %w: no folder", ErrInvalid)
	}
	abs, err := filepath.Abs(root)
	if err != nil {
		return nil, fmt.Errorf("checkpoint store: %w", err)
	}
	if err := os.MkdirAll(abs, 0o700); err != nil {
		return nil, fmt.Errorf("checkpoint store: %w", err)
	}
	if opts.Logger == nil {
		opts.Logger = slog.Default()
	}
	if opts.CachedUsers <= 0 {
		opts.CachedUsers = 64
	}
	return &Store{root: abs, log: opts.Logger, max: opts.CachedUsers, racy: racyWindow, users: map[string]*list.Element{}, lru: list.New()}, nil
}

// Root returns the store's folder.
func (s *Store) Root() string { return s.root }

// checkID checks a user or chat id before it names a folder or file of the
// store (the workspaces' rules: sandbox.ValidateID).
func checkID(what, id string) error {
	if err := sandbox.ValidateID(what, id); err != nil {
		return fmt.Errorf("%w: %v", ErrInvalid, err)
	}
	return nil
}

// user returns the user's store, cached, its folders created.
func (s *Store) user(name string) (*userStore, error) {
	if err := checkID("user", name); err != nil {
		return nil, err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if e, ok := s.users[name]; ok {
		s.lru.MoveToFront(e)
		return e.Value.(*userStore), nil
	}
	u := &userStore{dir: filepath.Join(s.root, name), log: s.log}
	for _, d := range []string{u.dir, u.path(dirPacks), u.path(dirObjects), u.path(dirIndex), u.path(dirPending), u.path(dirTmp)} {
		if err := os.Mkdir(d, 0o700); err != nil && !errors.Is(err, fs.ErrExist) {
			return nil, fmt.Errorf("checkpoint store: %w", err)
		}
	}
	s.users[name] = s.lru.PushFront(u)
	for s.lru.Len() > s.max {
		old := s.lru.Back()
		s.lru.Remove(old)
		delete(s.users, old.Value.(*userStore).name())
	}
	return u, nil
}

// Folders of a user's store.
const (
	dirPacks   = "packs"
	dirObjects = "objects"
	dirIndex   = "index"
	dirPending = "pending"
	dirTmp     = "tmp"
	lockFile   = "lock"
)

// lock takes the user's lock, shared or exclusive, waiting until ctx
// ends. Captures and restores hold it shared while they read and write
// objects; Collect holds it exclusive, so it never removes an object one
// of them relies on. It is a flock, so it holds across processes sharing
// the folder.
func (u *userStore) lock(ctx context.Context, exclusive bool) (func(), error) {
	f, err := os.OpenFile(u.path(lockFile), os.O_RDONLY|os.O_CREATE, 0o600)
	if err != nil {
		return nil, fmt.Errorf("checkpoint lock: %w", err)
	}
	if err := flock.Lock(ctx, f, exclusive, 5*time.Millisecond); err != nil {
		f.Close()
		if ctx.Err() != nil {
			return nil, err
		}
		return nil, fmt.Errorf("checkpoint lock: %w", err)
	}
	return func() { f.Close() }, nil
}

// enter returns the user's store locked (shared, or exclusive for
// Collect) with its object index current; the caller defers unlock.
func (s *Store) enter(ctx context.Context, user string, exclusive bool) (u *userStore, unlock func(), err error) {
	if u, err = s.user(user); err != nil {
		return nil, nil, err
	}
	if unlock, err = u.lock(ctx, exclusive); err != nil {
		return nil, nil, err
	}
	if err := u.refresh(); err != nil {
		unlock()
		return nil, nil, err
	}
	return u, unlock, nil
}

// allocated is what info's file takes on disk (its allocated blocks).
func allocated(info fs.FileInfo) int64 {
	if st, ok := info.Sys().(*syscall.Stat_t); ok {
		return st.Blocks * 512
	}
	return info.Size()
}
