"""The proxy in front of the real npm `@modelcontextprotocol/server-filesystem` (a TypeScript SDK
server, as agents run it), judged by the real daemon: its own tools pass through,
and its answer to a tool it does not have (`isError`, "MCP error -32602: Tool deploy_app not
found") counts as an unknown tool, so the 11th of 12 tries is blocked by unknown_tool_repeat."""
from __future__ import annotations

import os
import sys

import anyio
import pytest
from mcp import ClientSession, StdioServerParameters, stdio_client

from tests.support.metrics import delta
from tests.support.polyglot import run, tool

pytestmark = [pytest.mark.node, pytest.mark.daemon]  # npm installs the MCP server it proxies

PACKAGE = "@modelcontextprotocol/server-filesystem@2026.8.31"


@pytest.fixture(scope="module")
def filesystem_server(tmp_path_factory) -> list[str]:
    """The pinned server installed into a fresh directory; the command that starts it."""
    where = tmp_path_factory.mktemp("server-filesystem")
    installed = run([tool("npm"), "install", "--no-audit", "--no-fund", "--prefer-offline", PACKAGE], where)
    if installed.returncode != 0:
        pytest.fail(f"npm install {PACKAGE} failed ({installed.returncode}):\n{installed.tail()}", pytrace=False)
    (where / "files").mkdir()
    (where / "files" / "note.txt").write_text("hello from the filesystem server")
    return [str(where / "node_modules" / ".bin" / "mcp-server-filesystem"), str(where / "files")]


def test_an_unknown_tool_of_the_npm_server_is_blocked_at_the_eleventh_try(daemon, run_id, filesystem_server):
    proxy = StdioServerParameters(
        command=sys.executable, env=dict(os.environ),
        args=["-m", "loopwarden", "mcp-proxy", "--address", daemon.grpc_target, "--run-id", run_id, "--",
              *filesystem_server])
    note = os.path.join(filesystem_server[1], "note.txt")
    before = daemon.scrape()

    async def main():
        with open(os.devnull, "w") as quiet:
            async with stdio_client(proxy, errlog=quiet) as (read, write), ClientSession(read, write) as session:
                await session.initialize()
                read_back = await session.call_tool("read_text_file", {"path": note})
                tries = [await session.call_tool("deploy_app", {"attempt": index}) for index in range(12)]
                return read_back, tries

    read_back, tries = anyio.run(main)

    after = daemon.scrape()
    assert "hello from the filesystem server" == read_back.content[0].text
    assert [True] * 12 == [t.is_error for t in tries]
    assert ["MCP error -32602: Tool deploy_app not found"] * 10 == [t.content[0].text for t in tries[:10]]
    assert "unavailable tool deploy_app" in tries[10].content[0].text
    assert 2 == delta(before, after, "loopwarden_verdicts_total", action="block",
                      detector="unknown_tool_repeat", agent="default", integration="mcp_proxy")


@pytest.fixture(scope="module")
def daemon_args() -> tuple[str, ...]:
    return ()
