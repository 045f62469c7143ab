"""`loopwarden mcp-proxy`: loopwarden between an MCP client and an MCP server (the `mcp` extra).

The proxy starts the server as a child over stdio and is itself an MCP server to the client
(stdio, or Streamable HTTP with --listen). It relays JSON-RPC messages unchanged both ways
(`relay`), except that each `tools/call` is a tool_call first (`guard`): a BLOCK or an aborted
run answers the call itself with an `isError` result, and the server's result is the outcome.
"""
