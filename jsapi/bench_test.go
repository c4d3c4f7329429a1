package jsapi

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/agentbox/agentbox/chat"
)

const benchHook = `
interface Profile { visits: number; locale: string }

export function Create(ctx: Context, messages: Message[], options: CreateOptions): CreateResult | null {
  const key = ctx.chat_id + ":" + ctx.assistant_id;
  const p: Profile = { visits: messages.length, locale: ctx.locale };
  ctx.memory.user.Set("profile", p);
  ctx.memory.context.Set("key", key);
  if (ctx.user_id === "") {
    throw new Error("no user");
  }
  return { messages, options: { temperature: 0.1 } };
}

export function Next(ctx: Context, payload: NextPayload): NextResult | null {
  const p = ctx.memory.user.Get<Profile>("profile");
  const key = ctx.memory.context.Get("key");
  return { data: { visits: p ? p.visits : 0, key, len: payload.completion.length } };
}
`

// BenchmarkCreateNext is a warm Create+Next round trip of a TS hook that
// reads ctx fields and writes memory. It reports the median per round trip
// besides the mean.
func BenchmarkCreateNext(b *testing.B) {
	h := load(b, benchHook)
	store := NewMemStore()
	msgs := []chat.Message{{Role: "system", Content: "sys"}, {Role: "user", Content: "hello"}}
	temp := 0.7
	opts := chat.Options{ModelOptions: chat.ModelOptions{Temperature: &temp}, Connector: "deepseek.v3"}
	ctx := context.Background()
	durs := make([]time.Duration, 0, b.N)
	b.ReportAllocs()
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		start := time.Now()
		hc := &Context{ChatID: "c1", AssistantID: "coder", UserID: "u1", Locale: "en", Memory: store}
		if _, err := h.Create(ctx, hc, msgs, opts); err != nil {
			b.Fatal(err)
		}
		res, err := h.Next(ctx, hc, NextPayload{Messages: msgs, Completion: Completion{Content: "done"}}, opts)
		if err != nil || res == nil {
			b.Fatal(res, err)
		}
		durs = append(durs, time.Since(start))
	}
	b.StopTimer()
	slices.Sort(durs)
	b.ReportMetric(float64(durs[len(durs)/2].Nanoseconds())/1e3, "median-µs")
}

// hook500 is a 500-line TypeScript hook.
func hook500() string {
	var s strings.Builder
	s.WriteString("interface Item { id: number; name: string; tags?: string[] }\n")
	n := 1
	for i := 0; s.Len() == 0 || n < 490; i++ {
		fmt.Fprintf(&s, `export function helper%d(items: Item[], ctx: Context): number {
  let total = 0;
  for (const it of items) {
    if (it.tags && it.tags.includes("x%d")) { total += it.id * %d; }
    else { total -= it.name.length; }
  }
  ctx.memory.context.Set("h%d", { total, at: `+"`${ctx.chat_id}/%d`"+` });
  return total > %d ? total : -total;
}
`, i, i, i, i, i, i)
		n += 9
	}
	s.WriteString(`export function Create(ctx: Context, messages: Message[]) { return { messages }; }
export function Next(ctx: Context, p: NextPayload) { return null; }
`)
	return s.String()
}

func TestHook500(t *testing.T) {
	t.Parallel()
	src := hook500()
	if n := strings.Count(src, "\n"); n < 495 || n > 510 {
		t.Fatalf("hook500 has %d lines", n)
	}
	start := time.Now()
	h := load(t, src)
	t.Logf("load of a %d-line hook (first in this process if run alone): %v", strings.Count(src, "\n"), time.Since(start))
	if !h.Has("Create") || !h.Has("helper10") {
		t.Fatalf("exports = %v", h.Exports())
	}
}

// BenchmarkLoad500 is the first load of a 500-line hook: bundle and
// transpile, compile, and the discovery run.
func BenchmarkLoad500(b *testing.B) {
	a := writeAssistant(b, map[string]string{"src/index.ts": hook500()})
	b.ReportAllocs()
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		if _, err := Load(a); err != nil {
			b.Fatal(err)
		}
	}
}
