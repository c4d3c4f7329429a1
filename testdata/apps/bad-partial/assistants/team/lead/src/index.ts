// Yao-only globals and an old hook name are warnings, never errors.
export function Create(ctx: any, messages: any[]) {
  const r = Process("scripts.lead.Plan", messages);
  return { messages };
}

export function Done() {}
