"""A real MCP server, written with the `mcp` SDK, for the proxy tests: `python backend.py LOG`.

Every run of a tool appends a line to LOG (`lookup`, `cancelled`, …), so the tests can count how
often the server really ran a tool behind the proxy.
"""
from __future__ import annotations

import os
import sys

import anyio
import mcp_types as types
from mcp.server.mcpserver import Context, MCPServer

LOG = sys.argv[1]
ANSWER = "the same answer"

server = MCPServer("loop-backend")


def _note(line: str) -> None:
    with open(LOG, "a", encoding="utf-8") as handle:
        handle.write(line + "\n")


@server.tool()
async def lookup(query: str) -> str:
    """Look something up; the answer never changes."""
    _note("lookup")
    return ANSWER


@server.tool(annotations=types.ToolAnnotations(read_only_hint=False, destructive_hint=True))
async def send_note(to: str, text: str) -> str:
    """Send a note (annotated destructive: each run sends one more)."""
    _note("send_note")
    return f"sent to {to}"


@server.tool()
async def count_slowly(steps: int, ctx: Context) -> str:
    """Reports progress once per step."""
    for step in range(1, steps + 1):
        await ctx.report_progress(step, steps, f"step {step}")
        await anyio.sleep(0.01)
    return f"counted to {steps}"


@server.tool()
async def wait_forever(ctx: Context) -> str:
    """Never finishes on its own: for cancellation."""
    _note("waiting")
    try:
        await anyio.sleep(60)
    except anyio.get_cancelled_exc_class():
        _note("cancelled")
        raise
    return "woke up"


@server.tool()
async def big_answer(size: int) -> str:
    """An answer of `size` characters, always the same."""
    _note("big_answer")
    return "x" * size


@server.tool()
async def server_pid() -> str:
    """The server process's id, so that a test can kill it mid-call."""
    return str(os.getpid())


@server.tool()
async def ask_the_model(question: str, ctx: Context) -> str:
    """Asks the client's model (sampling: a request from the server to the client)."""
    result = await ctx.session.create_message(
        [types.SamplingMessage(role="user", content=types.TextContent(type="text", text=question))], max_tokens=20)
    return f"the model said: {result.content.text}"


@server.tool()
async def change_tools(ctx: Context) -> str:
    """Sends notifications/tools/list_changed."""
    await ctx.session.send_tool_list_changed()
    return "changed"


@server.resource("memo://greeting")
def greeting() -> str:
    return "hello from the backend"


@server.prompt()
def review(code: str) -> str:
    """Review some code."""
    return f"Please review: {code}"


if __name__ == "__main__":
    server.run()
