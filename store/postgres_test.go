package store

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"strings"
	"testing"
	"time"

	"github.com/agentbox/agentbox/chat"
	"github.com/agentbox/agentbox/internal/testenv"
)

// lockHelperEnv makes the test binary a helper process that opens the
// store at the DSN it holds, locks chat u/c (or waits for it) and says so
// on stdout, then stays until killed: a server that dies holding a lock.
const lockHelperEnv = "AGENTBOX_STORE_LOCK_HELPER"

func lockHelper() {
	ctx := context.Background()
	s, err := OpenConfig(ctx, Config{Driver: "postgres", DSN: os.Getenv(lockHelperEnv)})
	if err != nil {
		fmt.Println("error:", err)
		os.Exit(1)
	}
	fmt.Println("asking")
	if _, err := s.LockChat(ctx, "u", "c", 5, time.Hour); err != nil {
		fmt.Println("error:", err)
		os.Exit(1)
	}
	fmt.Println("locked")
	select {}
}

// startLockHelper starts a helper process and waits until it says want.
func startLockHelper(t *testing.T, dsn, want string) *exec.Cmd {
	t.Helper()
	cmd := exec.Command(os.Args[0], "-test.run=^$")
	cmd.Env = append(os.Environ(), lockHelperEnv+"="+dsn)
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = cmd.Process.Kill(); _ = cmd.Wait() })
	sc := bufio.NewScanner(out)
	for sc.Scan() {
		if sc.Text() == want {
			go func() {
				for sc.Scan() {
				}
			}()
			return cmd
		}
		if strings.HasPrefix(sc.Text(), "error:") {
			t.Fatalf("lock helper: %s", sc.Text())
		}
	}
	t.Fatalf("lock helper ended before saying %q", want)
	return nil
}

func waitTurns(t *testing.T, s *Store, want int, within time.Duration) time.Duration {
	t.Helper()
	t0 := time.Now()
	for {
		n, err := s.ChatTurns(context.Background(), "u", "c")
		if err != nil {
			t.Fatal(err)
		}
		if n == want {
			return time.Since(t0)
		}
		if time.Since(t0) > within {
			t.Fatalf("chat u/c has %d turns after %s, want %d", n, within, want)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// TestPostgresLockDiesWithItsServer: a server killed while it holds a
// chat releases it, and one killed while it waits leaves the line,
// without anyone's help: PostgreSQL ends their sessions when their
// connections close.
func TestPostgresLockDiesWithItsServer(t *testing.T) {
	t.Parallel()
	pg := testenv.Postgres(t)
	dsn := pg.NewDatabase(t)
	s := (database{Config{Driver: "postgres", DSN: dsn}}).open(t)
	ctx := context.Background()

	// The helper holds the chat: this store waits, then gets it when the
	// helper is killed.
	holder := startLockHelper(t, dsn, "locked")
	if _, err := s.LockChat(ctx, "u", "c", 1, 300*time.Millisecond); !errors.Is(err, ErrChatWait) {
		t.Fatalf("chat held by another process: %v, want ErrChatWait", err)
	}
	got := make(chan error, 1)
	var t0 time.Time
	go func() {
		unlock, err := s.LockChat(ctx, "u", "c", 1, time.Minute)
		if err == nil {
			unlock()
		}
		got <- err
	}()
	waitTurns(t, s, 2, 10*time.Second)
	t0 = time.Now()
	_ = holder.Process.Kill()
	if err := <-got; err != nil {
		t.Fatalf("after the holder died: %v", err)
	}
	t.Logf("a killed holder's chat was taken %s after the kill", time.Since(t0).Round(time.Millisecond))

	// This store holds the chat; the helper waits for it and is killed:
	// its wait leaves PostgreSQL's queue and its place in line is free.
	unlock, err := s.LockChat(ctx, "u", "c", 1, time.Second)
	if err != nil {
		t.Fatal(err)
	}
	defer unlock()
	waiter := startLockHelper(t, dsn, "asking")
	waitTurns(t, s, 2, 10*time.Second)
	if _, err := s.LockChat(ctx, "u", "c", 1, time.Second); !errors.Is(err, ErrChatQueueFull) {
		t.Fatalf("queue 1 with the helper waiting: %v, want ErrChatQueueFull", err)
	}
	_ = waiter.Process.Kill()
	d := waitTurns(t, s, 1, 10*time.Second)
	t.Logf("a killed waiter left the line %s after the kill", d.Round(time.Millisecond))
	if _, err := s.LockChat(ctx, "u", "c", 1, 100*time.Millisecond); !errors.Is(err, ErrChatWait) {
		t.Errorf("after the waiter died: %v, want ErrChatWait (a place in line, the chat still held)", err)
	}
}

// TestPostgresRestart: when PostgreSQL restarts, the store's next calls
// reconnect, none failing on a pooled connection the restart ended; a chat
// lock held across the restart is lost with its session, so the chat is
// free again.
func TestPostgresRestart(t *testing.T) {
	t.Parallel()
	pg := testenv.Postgres(t)
	dsn := pg.NewDatabase(t)
	s := (database{Config{Driver: "postgres", DSN: dsn}}).open(t)
	ctx := context.Background()
	if err := s.AppendMessages(ctx, "u", "c", "a", chat.Message{Role: "user", Content: "before"}); err != nil {
		t.Fatal(err)
	}
	unlock, err := s.LockChat(ctx, "u", "c", 0, time.Second)
	if err != nil {
		t.Fatal(err)
	}
	pg.Restart(t)
	h, err := s.History(ctx, "u", "c")
	if err != nil || len(h) != 1 || h[0].Content != "before" {
		t.Fatalf("history after a restart = %v, %v", h, err)
	}
	if err := s.AppendMessages(ctx, "u", "c", "a", chat.Message{Role: "assistant", Content: "after"}); err != nil {
		t.Fatal(err)
	}
	u2, err := s.LockChat(ctx, "u", "c", 0, 5*time.Second)
	if err != nil {
		t.Fatalf("lock after a restart: %v", err)
	}
	u2()
	unlock() // the lost lock's release fails quietly
}

// TestPostgresSchemas: two stores in two schemas of one database (the
// dsn's search_path) keep apart: tables, migrations and chat locks.
func TestPostgresSchemas(t *testing.T) {
	t.Parallel()
	pg := testenv.Postgres(t)
	dsn := pg.NewDatabase(t)
	ctx := context.Background()
	admin := (database{Config{Driver: "postgres", DSN: dsn}}).open(t)
	for _, q := range []string{`CREATE SCHEMA a`, `CREATE SCHEMA b`} {
		if _, err := admin.db.ExecContext(ctx, q); err != nil {
			t.Fatal(err)
		}
	}
	a := (database{Config{Driver: "postgres", DSN: dsn + "&search_path=a"}}).open(t)
	b := (database{Config{Driver: "postgres", DSN: dsn + "&search_path=b"}}).open(t)
	if err := a.AppendMessages(ctx, "u", "c", "x", chat.Message{Role: "user", Content: "in a"}); err != nil {
		t.Fatal(err)
	}
	if h, _ := b.History(ctx, "u", "c"); len(h) != 0 {
		t.Errorf("schema b sees a's history: %v", h)
	}
	ua, err := a.LockChat(ctx, "u", "c", 0, time.Second)
	if err != nil {
		t.Fatal(err)
	}
	defer ua()
	ub, err := b.LockChat(ctx, "u", "c", 0, time.Second)
	if err != nil {
		t.Fatalf("a's chat lock holds b's chat of the same ids: %v", err)
	}
	ub()
	var tables int
	if err := admin.db.QueryRowContext(ctx, `SELECT COUNT(*) FROM information_schema.tables WHERE table_schema = 'a'`).Scan(&tables); err != nil || tables < 6 {
		t.Errorf("schema a has %d tables, %v", tables, err)
	}
	if _, err := OpenConfig(ctx, Config{Driver: "postgres", DSN: dsn + "&search_path=nowhere"}); err == nil || !strings.Contains(err.Error(), "search_path") {
		t.Errorf("a search_path of no schema: %v", err)
	}
}

// TestPostgresQueryTimeouts: statement and idle-session timeouts in the
// DSN bound queries, not chat locks: a lock sits idle for a turn's length
// and a wait lasts up to chat_wait.
func TestPostgresQueryTimeouts(t *testing.T) {
	t.Parallel()
	pg := testenv.Postgres(t)
	dsn := pg.NewDatabase(t) + "&statement_timeout=200&idle_session_timeout=300"
	s := (database{Config{Driver: "postgres", DSN: dsn}}).open(t)
	ctx := context.Background()
	unlock, err := s.LockChat(ctx, "u", "c", 1, time.Second)
	if err != nil {
		t.Fatal(err)
	}
	t0 := time.Now()
	if _, err := s.LockChat(ctx, "u", "c", 1, time.Second); !errors.Is(err, ErrChatWait) || time.Since(t0) < 900*time.Millisecond {
		t.Errorf("a 1s wait under a 200ms statement_timeout: %v after %s, want ErrChatWait after 1s", err, time.Since(t0))
	}
	time.Sleep(time.Second) // idle past idle_session_timeout
	if n, err := s.ChatTurns(ctx, "u", "c"); n != 1 || err != nil {
		t.Errorf("after an idle second the chat has %d turns (%v): the lock's session was ended", n, err)
	}
	unlock()
}
