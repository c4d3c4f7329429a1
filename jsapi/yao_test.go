package jsapi

import (
	"context"
	"errors"
	"strings"
	"testing"

	"github.com/agentbox/agentbox/chat"
)

// TestYaoHooksLoad: a hook written for Yao loads: its runtime imports are
// dropped (in the entry and in the files it imports), its Exception, atob
// and btoa work, and a Yao-only global is reported where it is used.
func TestYaoHooksLoad(t *testing.T) {
	t.Parallel()
	a := writeAssistant(t, map[string]string{
		"src/index.ts": `import { Process, time } from "@yao/runtime";
import { agent } from "@yaoapps/client";
import { helper } from "./lib";

function Create(ctx: any, messages: any[]) {
  if (messages.length === 0) {
    throw new Exception("no messages", 400);
  }
  return { messages, temperature: helper() };
}

function Next(ctx: any, payload: any) {
  const user = Process("models.user.Find", 1);
  return { data: user };
}

export function Encode(ctx: any, args: any) {
  return btoa(args.s) + ":" + atob(btoa(args.s));
}

function Done() {}
`,
		"src/lib.ts": `import { log } from "@yao/runtime";
export function helper() { time.Sleep(1); return 0.5; }
`,
	})
	h, err := Load(a)
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, w := range h.Warnings() {
		if !w.Warning() {
			t.Errorf("not a warning: %s", w)
		}
		got = append(got, w.String())
	}
	want := []string{
		"src/index.ts: warning: Done is never called: it is a hook of Yao's older versions; Yao and agentbox call Create and Next",
		`src/index.ts:13:16: warning: Process("models.user.Find"): models.user.Find is a Yao process (models.*)`,
	}
	if len(got) != len(want) {
		t.Fatalf("warnings:\n%s", strings.Join(got, "\n"))
	}
	for i := range want {
		if !strings.HasPrefix(got[i], want[i]) {
			t.Errorf("warning %d = %q, want prefix %q", i, got[i], want[i])
		}
	}

	out, err := h.Call(context.Background(), &Context{}, "Encode", map[string]any{"s": "hi"})
	if err != nil || out != "aGk=:hi" {
		t.Fatalf("Encode = %v, %v", out, err)
	}
	_, err = h.Create(context.Background(), &Context{}, nil, chat.Options{})
	var je *Error
	if !errors.As(err, &je) || je.Name != "Exception" || je.Code != "400" || je.Message != "no messages" {
		t.Fatalf("Exception: %#v", err)
	}
	// time.Sleep in the helper waits.
	res, err := h.Create(context.Background(), &Context{}, []chat.Message{{Role: "user", Content: "x"}}, chat.Options{})
	if err != nil || res.Options == nil || *res.Options.Temperature != 0.5 {
		t.Fatalf("Create with time.Sleep: %+v, %v", res, err)
	}
	// A Yao process of another family: YAO_ONLY with the call's position.
	_, err = h.Next(context.Background(), &Context{}, NextPayload{Completion: Completion{Content: "x"}}, chat.Options{})
	if !errors.As(err, &je) || je.Code != CodeYaoOnly || !strings.Contains(err.Error(), "models.user.Find is a Yao process") || !strings.Contains(err.Error(), "(at src/index.ts:13:") {
		t.Fatalf("Process: %v", err)
	}
}

// TestYaoGlobalsStayLocal: a hook's own variable named like a Yao global
// is its own, neither reported nor replaced.
func TestYaoGlobalsStayLocal(t *testing.T) {
	t.Parallel()
	h := load(t, `const time = { Sleep: (n: number) => n * 2 };
export function T(ctx: any, args: any) { const Process = (x: number) => x + 1; return Process(time.Sleep(args.n)); }
`)
	if w := h.Warnings(); len(w) != 0 {
		t.Fatalf("warnings: %v", w)
	}
	out, err := h.Call(context.Background(), &Context{}, "T", map[string]any{"n": 2})
	if err != nil || out != 5.0 {
		t.Fatalf("T = %v, %v", out, err)
	}
}

func TestStripYaoImports(t *testing.T) {
	t.Parallel()
	src := "import { a } from \"@yao/runtime\";\nimport b from './b';\nimport * as c from \"../lib/yao\";\nimport {\n  d,\n  e\n} from '@gou/x'\nx();\n"
	want := "// import { a } from \"@yao/runtime\";\nimport b from './b';\n// import * as c from \"../lib/yao\";\n// import {\n//   d,\n//   e\n// } from '@gou/x'\nx();\n"
	if got := stripYaoImports(src); got != want {
		t.Fatalf("got:\n%s\nwant:\n%s", got, want)
	}
}
