package jsapi

import (
	"context"
	"errors"
	"strings"
	"testing"

	"github.com/agentbox/agentbox/chat"
)

// TestHookErrorHints: a hook's runtime error names the file, line and
// column of the hook source, carries a short stack, and says which member
// of the hook API a misspelt one was meant to be; the turn's error says
// the same.
func TestHookErrorHints(t *testing.T) {
	t.Parallel()
	sb := newFakeSandbox(t)
	h := load(t, `
function helper(ctx: any) {
  ctx.sandbox.writeFile("a.txt", "x");
}
function deep(n: number): number { return n === 0 ? (undefined as any).x : deep(n - 1); }
export function Create(ctx: any, messages: any[], options: any) {
  if (options.user === "member") { helper(ctx); }
  if (options.user === "misplaced") { ctx.Exec(["true"]); }
  if (options.user === "deep") { return deep(40); }
  const o: any = {};
  return o.x.deep;
}
`)
	for _, tt := range []struct {
		user, msg, at string
		frames        int
	}{
		{"member", `Object has no member 'writeFile' (did you mean ctx.sandbox.WriteFile?)`, "src/index.ts:3:", 2},
		{"misplaced", `Object has no member 'Exec' (did you mean ctx.sandbox.Exec?)`, "src/index.ts:8:", 1},
		{"plain", `Cannot read property 'deep' of undefined`, "src/index.ts:11:", 1},
		{"deep", `Cannot read property 'x' of undefined`, "src/index.ts:5:", maxStackFrames},
	} {
		_, err := h.Create(context.Background(), &Context{Sandbox: sb.Sandbox}, nil, chat.Options{ModelOptions: chat.ModelOptions{User: tt.user}})
		var je *Error
		if !errors.As(err, &je) {
			t.Fatalf("%s: %v", tt.user, err)
		}
		if !strings.HasPrefix(je.Message, tt.msg) || !strings.Contains(err.Error(), "(at "+tt.at) {
			t.Errorf("%s: error %q, want %q at %s", tt.user, err, tt.msg, tt.at)
		}
		frames := strings.Count(je.Stack, "\n    at ")
		if frames != tt.frames || (tt.user == "deep") != strings.Contains(je.Stack, "more") {
			t.Errorf("%s: stack of %d frames, want %d:\n%s", tt.user, frames, tt.frames, je.Stack)
		}
		if Stack(err) != je.Stack {
			t.Errorf("%s: Stack(err) differs", tt.user)
		}
		if ce := ChatError(err); ce.Code != chat.ErrHook || ce.Message != je.Error() || !strings.HasPrefix(ce.Message, "Create hook: TypeError: ") {
			t.Errorf("%s: chat error %+v", tt.user, ce)
		}
	}
}

func TestMemberHint(t *testing.T) {
	t.Parallel()
	for _, tt := range []struct{ msg, want string }{
		{"Object has no member 'writeFile'", " (did you mean ctx.sandbox.WriteFile?)"},
		{"Object has no member 'readDir'", " (did you mean ctx.workspace.ReadDir?)"},
		{"Object has no member 'info'", " (did you mean console.info?)"},
		{"Object has no member 'Warnn'", " (did you mean log.Warn?)"},
		{"Object has no member 'frobnicate'", ""},
		{"Cannot read property 'x' of undefined", ""},
	} {
		if got := memberHint(tt.msg); got != tt.want {
			t.Errorf("memberHint(%q) = %q, want %q", tt.msg, got, tt.want)
		}
	}
}
