function Create(ctx: any, messages: any[]) {
  const files = ctx.sandbox.ListDir(".";
  return null;
}
