// Look a word up: the tool of the words MCP server.
function Define(args: any): any {
  return { word: args.word, meaning: "a greeting" };
}
