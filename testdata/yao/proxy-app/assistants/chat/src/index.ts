import { log } from "@yao/runtime";

function Next(ctx: any, payload: any) {
  const c = payload.completion;
  return { data: { answer: c.content, role: c.role, finish_reason: c.finish_reason, tokens: c.usage.total_tokens } };
}
