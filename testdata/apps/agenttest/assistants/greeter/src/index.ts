// The greeter's hooks.
import { Greeting } from "./format";

// Create counts the user's turns in chat memory (a script test reads it).
function Create(ctx: any, messages: any[], options: any) {
  const n = (ctx.memory.chat.Get("turns") || 0) + 1;
  ctx.memory.chat.Set("turns", n);
  return null;
}

// Next answers with structured data when the request asks for it
// (metadata.structured): that data is the case's output.
function Next(ctx: any, payload: any, options: any) {
  if (!ctx.metadata || !ctx.metadata.structured) {
    return null;
  }
  const text = `${payload.completion}`;
  return {
    data: {
      greeting: Greeting(ctx.metadata.name || ""),
      answer: text,
      words: text.split(/\s+/).length,
      tags: ["greeting", "structured"],
    },
  };
}
