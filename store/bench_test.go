package store

import (
	"context"
	"encoding/json"
	"fmt"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/agentbox/agentbox/chat"
	"github.com/agentbox/agentbox/internal/testenv"
)

// countStatements counts the statements sent to PostgreSQL, each one
// round trip (BEGIN and COMMIT included).
type countStatements struct{ n atomic.Int64 }

func (c *countStatements) TraceQueryStart(ctx context.Context, _ *pgx.Conn, _ pgx.TraceQueryStartData) context.Context {
	c.n.Add(1)
	return ctx
}

func (c *countStatements) TraceQueryEnd(context.Context, *pgx.Conn, pgx.TraceQueryEndData) {}

// BenchmarkTurn is one chat turn's store work, as the pipeline and the
// example coder's hooks do it, on a chat of 200 messages: lock the chat,
// claim it, read its history, read and write hook memory (the remember
// tool, the Next hook), append the question and answer, record usage,
// unlock. On PostgreSQL it reports the round trips a turn takes.
func BenchmarkTurn(b *testing.B) {
	ctx := context.Background()
	var counter countStatements
	stores := map[string]func(b *testing.B) *Store{
		"sqlite": func(b *testing.B) *Store {
			s, err := Open(ctx, filepath.Join(b.TempDir(), "agentbox.db"))
			if err != nil {
				b.Fatal(err)
			}
			return s
		},
		"postgres": func(b *testing.B) *Store {
			pg := testenv.Postgres(b)
			pgTracer = &counter
			defer func() { pgTracer = nil }()
			s, err := OpenConfig(ctx, Config{Driver: "postgres", DSN: pg.NewDatabase(b)})
			if err != nil {
				b.Fatal(err)
			}
			return s
		},
	}
	long := strings.Repeat("lorem ipsum dolor sit amet ", 20) // ~540 bytes
	var hist []chat.Message
	for i := range 200 {
		role := chat.RoleUser
		if i%2 == 1 {
			role = chat.RoleAssistant
		}
		hist = append(hist, chat.Message{Role: role, Content: fmt.Sprint(i, long)})
	}
	for _, drv := range []string{"sqlite", "postgres"} {
		b.Run(drv, func(b *testing.B) {
			s := stores[drv](b)
			defer s.Close()
			if err := s.ReplaceHistory(ctx, "u", "c", "a", hist); err != nil {
				b.Fatal(err)
			}
			turn := func() {
				unlock, err := s.LockChat(ctx, "u", "c", 4, time.Minute)
				if err != nil {
					b.Fatal(err)
				}
				defer unlock()
				if _, err := s.ClaimChat(ctx, "u", "c", "a"); err != nil {
					b.Fatal(err)
				}
				if _, err := s.History(ctx, "u", "c"); err != nil {
					b.Fatal(err)
				}
				if _, _, err := s.MemGet(ctx, "chat", "u/c", "notes"); err != nil {
					b.Fatal(err)
				}
				if err := s.MemSet(ctx, "chat", "u/c", "notes", json.RawMessage(`["a note"]`)); err != nil {
					b.Fatal(err)
				}
				if err := s.MemSet(ctx, "chat", "u/c", "last_commit", json.RawMessage(`"abc1234"`)); err != nil {
					b.Fatal(err)
				}
				if err := s.AppendMessages(ctx, "u", "c", "a", chat.Message{Role: "user", Content: "question"}, chat.Message{Role: "assistant", Content: long}); err != nil {
					b.Fatal(err)
				}
				if err := s.RecordUsage(ctx, UsageRecord{UserID: "u", ChatID: "c", AssistantID: "a", Connector: "x", Model: "m"}); err != nil {
					b.Fatal(err)
				}
			}
			var trips int64
			keepLength := func() { // untimed: the chat stays at 200 messages
				b.StopTimer()
				trips += counter.n.Load()
				if err := s.ReplaceHistory(ctx, "u", "c", "a", hist); err != nil {
					b.Fatal(err)
				}
				counter.n.Store(0)
				b.StartTimer()
			}
			turn() // warm: connections and prepared statements
			keepLength()
			trips = 0
			b.ReportAllocs()
			b.ResetTimer()
			for b.Loop() {
				turn()
				keepLength()
			}
			if drv == "postgres" {
				b.ReportMetric(float64(trips)/float64(b.N), "roundtrips/turn")
			}
		})
	}
}
