"""uvicorn's HTTP/1.1 protocol (h11) for --listen, with a header timeout.

uvicorn closes a kept-alive connection that stays idle between requests, but not one that sends
a request's headers a byte at a time, nor one that connects and says nothing: enough of those
hold the listener's connections for as long as their senders like. Here every connection must
complete a request's headers within HEADER_TIMEOUT_SECONDS of connecting, and again of its
previous response's end, or it is closed. Once a request's headers are in, the timer stops: a
request's body and a long-lived response stream (SSE) are the session's own business.
"""
from __future__ import annotations

import asyncio

from uvicorn.protocols.http.h11_impl import H11Protocol

HEADER_TIMEOUT_SECONDS = 10.0


class HeadersInTime(H11Protocol):
    header_timeout = HEADER_TIMEOUT_SECONDS
    _timer: asyncio.TimerHandle | None = None
    _waiting_after = None  # the request/response cycle the timer was armed after (None: none yet)

    def connection_made(self, transport: asyncio.Transport) -> None:  # type: ignore[override]
        super().connection_made(transport)
        self._arm()

    def data_received(self, data: bytes) -> None:
        super().data_received(data)
        if self._timer is not None and self.cycle is not self._waiting_after:
            self._disarm()  # a new request's headers are in

    def on_response_complete(self) -> None:
        super().on_response_complete()
        if not self.transport.is_closing():
            self._arm()

    def connection_lost(self, exc: Exception | None) -> None:
        self._disarm()
        super().connection_lost(exc)

    def _arm(self) -> None:
        self._disarm()
        self._waiting_after = self.cycle
        self._timer = self.loop.call_later(self.header_timeout, self._too_slow)

    def _disarm(self) -> None:
        if self._timer is not None:
            self._timer.cancel()
            self._timer = None

    def _too_slow(self) -> None:
        self._timer = None
        if self.cycle is self._waiting_after and not self.transport.is_closing():
            self.transport.close()
