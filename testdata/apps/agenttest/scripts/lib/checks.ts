// Script assertions of the app: `{"type": "script", "script":
// "scripts.lib.checks.AsksForName"}` calls AsksForName(output, input,
// expected) and takes true/false or {pass, message}.
export function AsksForName(output: any, input: any, expected: any): boolean {
  return typeof output === "string" && /your name\?/i.test(output);
}
