package jsapi

import (
	"strings"
	"testing"
)

// TestCtxMemberWarnings: check flags what a hook reads off ctx that the
// hook API lacks, at its line in the hook source, with the member meant.
func TestCtxMemberWarnings(t *testing.T) {
	t.Parallel()
	h := load(t, `export function Create(ctx: any, messages: any) {
  const r = ctx.agnet.Call("a", messages);
  const s = ctx.llm.Strem("c", messages);
  ctx.memory.user.Set("k", 1);
  ctx.mine = 1;
  const x = ctx.mine + ctx.chat_id.length + ctx.metadata.anything;
  const t = ctx.trace;
  ctx.computer?.Exec(["true"]);
  ctx.workspace.ReadFil("f");
  if (ctx.hasOwnProperty("llm")) ctx.Send("ok");
  return null;
}`)
	var got []string
	for _, w := range h.Warnings() {
		got = append(got, w.String())
	}
	want := []string{
		"src/index.ts:2:13: warning: ctx.agnet is not a member of the hook API: it is undefined (did you mean ctx.agent?)",
		"src/index.ts:3:13: warning: ctx.llm.Strem is not a member of the hook API: it is undefined (did you mean ctx.llm.Stream?)",
		"src/index.ts:7:13: warning: ctx.trace is a member of Yao's hook ctx that agentbox's does not have: it is undefined here",
		"src/index.ts:9:3: warning: ctx.workspace.ReadFil is not a member of the hook API: it is undefined (did you mean ctx.workspace.ReadFile?)",
	}
	if strings.Join(got, "\n") != strings.Join(want, "\n") {
		t.Errorf("warnings:\n%s\nwant:\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
}
