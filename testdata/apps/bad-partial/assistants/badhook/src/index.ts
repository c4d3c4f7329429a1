export function Create(ctx: any, messages: any[]) {
  return { messages: messages.map((m) => m.content +) };
}
