/** agents.team.reviewer.checks.Lint: a tool of the reviewer's own MCP server. */
export function Lint(args: { code: string }) {
  const issues: string[] = [];
  if (args.code.includes("var ")) issues.push("use let or const, not var");
  return { issues };
}
