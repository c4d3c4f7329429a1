function Create(ctx: any, messages: any[]) {
  const files = ctx.sandbox.ListDir(".");
  time.Sleep(10);
  return { messages, options: { sandbox: { arguments: { max_turns: files.length > 10 ? 20 : 12 } } } };
}
