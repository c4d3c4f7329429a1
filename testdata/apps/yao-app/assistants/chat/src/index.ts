import { Process, log } from "@yao/runtime";

/** Create picks a prompt preset the way Yao hooks do. */
function Create(ctx: any, messages: any[], options: any) {
  if (messages.length === 0) {
    throw new Exception("no input", 400);
  }
  const last = messages[messages.length - 1];
  if (typeof last.content === "string" && last.content.startsWith("/short")) {
    return { prompt_preset: "short", temperature: 0.2 };
  }
  return null;
}

function Next(ctx: any, payload: any, options: any) {
  if (payload.completion.finish_reason === "length") {
    const saved = Process("models.chat.Save", payload.completion.content);
    return { data: saved };
  }
  return null;
}

/** Yao's old hook: never called. */
function Done(ctx: any) {}
