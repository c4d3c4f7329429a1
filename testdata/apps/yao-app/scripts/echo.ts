/** Tools of the echo MCP server (mcps/echo.mcp.yao): scripts.echo.<Fn>. */

/** Ping answers pong, count times. */
function Ping(args: { count?: number }, ctx?: any) {
  return { message: "pong", count: args?.count || 1, chat_id: ctx?.chat_id ?? null };
}
