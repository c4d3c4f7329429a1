// Every even run of a test case (its chat id ends -r2, -r4, ...) gets a
// message the scripted model answers differently.
function Create(ctx: any, messages: any[], options: any) {
  const m = /-r(\d+)$/.exec(ctx.chat_id || "");
  if (!m || Number(m[1]) % 2 === 1) {
    return null;
  }
  const last = messages[messages.length - 1];
  return { messages: [...messages.slice(0, -1), { role: "user", content: `[variant B] ${last.content}` }] };
}
