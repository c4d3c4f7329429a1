// Helpers of the greeter's hooks, tested by format_test.ts.

export function Greeting(name: string): string {
  const n = (name || "").trim();
  return n ? `Hello, ${n}!` : "Hello!";
}

export function Slug(s: string): string {
  return (s || "")
    .toLowerCase()
    .replace(/[^a-z0-9]+/g, "-")
    .replace(/^-+|-+$/g, "");
}

export function Words(s: string): string[] {
  return (s || "").split(/\s+/).filter((w) => w !== "");
}

// IsGreeting is a script assertion: `{"type": "script", "script":
// "agents.greeter.format.IsGreeting"}` gets (output, input, expected).
export function IsGreeting(output: any, input: any, expected: any) {
  const text = typeof output === "string" ? output : JSON.stringify(output);
  const pass = /\b(hello|hi|bonjour)\b/i.test(text);
  return { pass, message: pass ? "the answer greets" : `the answer does not greet: ${text}` };
}
