"""The proxy's own standard input and output for the SDK's `stdio_server` (stdio mode).

The SDK reads stdin line by line in a worker thread, which no cancellation can stop: when the
MCP server behind the proxy exits, the proxy could not end until its client wrote another line
or closed stdin, so the client's calls went unanswered. Here stdin is read on the event loop
(an asyncio pipe reader), so leaving `stdio_server` ends the read at once; and a message is
handed to stdout without an await that a cancellation could interrupt, then written out by
`drain()` at the end whatever was cancelled, so the errors for the calls the server never
answered still reach the client. A stdin that is not a pipe, socket or terminal (a regular
file) falls back to the SDK's own reader. A line longer than MAX_MESSAGE_BYTES is answered with
an error and skipped, never held whole in memory; so is a line that is JSON but no JSON-RPC
message the proxy can relay (a list `id`, no `method`: session_meta.invalid_message), which the
SDK would drop unanswered.
"""
from __future__ import annotations

import asyncio
import json
import os
import sys
import threading
from typing import TextIO

import anyio

from .session_meta import ID_PREFIX_BYTES, MAX_MESSAGE_BYTES, invalid_message, too_large_error

class StdinLines:
    """`async for line in StdinLines(reader, stdout)`: the lines of stdin as text. A line longer
    than MAX_MESSAGE_BYTES is not handed on: it is read through to its end (only its head kept)
    and answered on stdout with the too-large error, and the next line is read."""

    def __init__(self, reader: asyncio.StreamReader, stdout: StdoutLines | None = None,
                 stderr: TextIO = sys.stderr) -> None:
        self._reader = reader
        self._stdout = stdout
        self._stderr = stderr

    def __aiter__(self) -> StdinLines:
        return self

    async def __anext__(self) -> str:
        while True:
            try:
                line = await self._reader.readuntil(b"\n")
            except asyncio.IncompleteReadError as exc:  # the last line, without its newline
                line = exc.partial
                if not line:
                    raise StopAsyncIteration from None
            except asyncio.LimitOverrunError as exc:
                await self._refuse_long_line(exc.consumed)
                continue
            text = line.decode("utf-8", "replace")
            if await self._refused_invalid(text):
                continue
            return text

    async def _refused_invalid(self, text: str) -> bool:
        """Answer a line that is JSON but no relayable JSON-RPC message with its error; whether it was."""
        if not text.strip():
            return False
        try:
            decoded = json.loads(text)
        except (ValueError, RecursionError):
            return False  # the SDK's reader reports it
        error = invalid_message(decoded)
        if error is None:
            return False
        print(f"loopwarden mcp-proxy: refused an invalid message from the client: {error['error']['message']}",
              file=self._stderr, flush=True)
        if self._stdout is not None:
            await self._stdout.write(json.dumps(error) + "\n")
            await self._stdout.flush()
        return True

    async def _refuse_long_line(self, consumed: int) -> None:
        head = b""
        size = 0
        while True:
            # `consumed` bytes hold no newline: take them, then look for the line's end again.
            chunk = await self._reader.readexactly(consumed)
            size += len(chunk)
            if len(head) < ID_PREFIX_BYTES:
                head += chunk[:ID_PREFIX_BYTES - len(head)]
            try:
                size += len(await self._reader.readuntil(b"\n"))
                break
            except asyncio.IncompleteReadError as exc:
                size += len(exc.partial)
                break
            except asyncio.LimitOverrunError as exc:
                consumed = exc.consumed
        error = too_large_error(head, size)
        print(f"loopwarden mcp-proxy: refused a message of {size} bytes from the client (at most "
              f"{MAX_MESSAGE_BYTES}; request id {error['id']!r})", file=self._stderr, flush=True)
        if self._stdout is not None:
            await self._stdout.write(json.dumps(error) + "\n")
            await self._stdout.flush()


async def stdin_lines(stdout: StdoutLines | None = None) -> StdinLines | None:
    """Stdin read on the event loop, or None where asyncio cannot watch it."""
    loop = asyncio.get_running_loop()
    reader = asyncio.StreamReader(limit=MAX_MESSAGE_BYTES)
    try:
        await loop.connect_read_pipe(lambda: asyncio.StreamReaderProtocol(reader),
                                     os.fdopen(os.dup(0), "rb", buffering=0))
    except (OSError, ValueError):
        return None
    return StdinLines(reader, stdout)


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
