import { Process } from "@yao/runtime";

function Create(ctx: any, messages: any[], options: any) {
  ctx.sandbox.WriteFile("from-create.txt", "written by Create\n");
  return { messages };
}

function Next(ctx: any, payload: any) {
  const files = ctx.sandbox.ListDir(".").map((f: any) => f.name);
  return { data: { answer: payload.completion.content, files, tools: payload.tools.map((t: any) => t.tool) } };
}
