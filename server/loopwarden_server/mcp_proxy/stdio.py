"""The proxy's own standard input and output for the SDK's `stdio_server` (stdio mode).

The SDK reads stdin line by line in a worker thread, which no cancellation can stop: when the
MCP server behind the proxy exits, the proxy could not end until its client wrote another line
or closed stdin, so the client's calls went unanswered. Here stdin is read on the event loop
(an asyncio pipe reader), so leaving `stdio_server` ends the read at once; and a message is
handed to stdout without an await that a cancellation could interrupt, then written out by
`drain()` at the end whatever was cancelled, so the errors for the calls the server never
answered still reach the client. A stdin that is not a pipe, socket or terminal (a regular
file) falls back to the SDK's own reader.
"""
from __future__ import annotations

import asyncio
import os
import threading

import anyio

# The longest line (one JSON-RPC message) read from the client; the SDK's reader has no limit.
MAX_LINE_BYTES = 256 * 1024 * 1024


class StdinLines:
    """`async for line in StdinLines(reader)`: the lines of stdin as text."""

    def __init__(self, reader: asyncio.StreamReader) -> None:
        self._reader = reader

    def __aiter__(self) -> StdinLines:
        return self

    async def __anext__(self) -> str:
        line = await self._reader.readline()
        if not line:
            raise StopAsyncIteration
        return line.decode("utf-8", "replace")


async def stdin_lines() -> StdinLines | None:
    """Stdin read on the event loop, or None where asyncio cannot watch it."""
    loop = asyncio.get_running_loop()
    reader = asyncio.StreamReader(limit=MAX_LINE_BYTES)
    try:
        await loop.connect_read_pipe(lambda: asyncio.StreamReaderProtocol(reader),
                                     os.fdopen(os.dup(0), "rb", buffering=0))
    except (OSError, ValueError):
        return None
    return StdinLines(reader)


class StdoutLines:
    """What stdio_server writes to stdout: `write` only queues (no await, so nothing can cancel
    it halfway), `flush` writes the queue in a worker thread, `drain` writes what is left."""

    def __init__(self) -> None:
        self._fd = os.dup(1)
        # As the SDK does: fd 1 now goes to stderr, so a stray print cannot corrupt the wire.
        os.dup2(2, 1)
        self._queued: list[bytes] = []
        self._lock = threading.Lock()

    async def write(self, text: str) -> None:
        with self._lock:
            self._queued.append(text.encode("utf-8"))

    async def flush(self) -> None:
        await anyio.to_thread.run_sync(self.drain)

    def drain(self) -> None:
        with self._lock:
            data, self._queued = b"".join(self._queued), []
            view = memoryview(data)
            while view:
                view = view[os.write(self._fd, view):]
