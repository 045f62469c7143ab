"""The plumbing of a scripted model API on loopback, for tests that run a real agent host (Claude
Code, Codex, Gemini CLI) against loopwarden without a network: a threaded HTTP server whose
handler sends JSON or server-sent events. Each test module supplies the host's API shape (its
server's reply logic and its handler's do_POST)."""
from __future__ import annotations

import contextlib
import http.server
import threading
from collections.abc import Iterator
from typing import TypeVar


class ScriptedModelServer(http.server.ThreadingHTTPServer):
    """A threaded server on a free loopback port; `lock` guards what its replies record."""

    def __init__(self, handler: type[http.server.BaseHTTPRequestHandler]) -> None:
        super().__init__(("127.0.0.1", 0), handler)
        self.lock = threading.Lock()

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.server_address[1]}"


class JsonHandler(http.server.BaseHTTPRequestHandler):
    """HTTP/1.1 with a Content-Length on every answer (hosts keep connections alive), quiet logs,
    and `{}` for a GET."""

    protocol_version = "HTTP/1.1"

    def log_message(self, *args) -> None:
        pass

    def _send(self, body: bytes, content_type: str) -> None:
        self.send_response(200)
        self.send_header("Content-Type", content_type)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def do_GET(self) -> None:
        self._send(b"{}", "application/json")


Server = TypeVar("Server", bound=ScriptedModelServer)


@contextlib.contextmanager
def serving(model: Server) -> Iterator[Server]:
    """The model served on a thread for the block, then shut down and closed."""
    thread = threading.Thread(target=model.serve_forever, daemon=True)
    thread.start()
    try:
        yield model
    finally:
        model.shutdown()
        model.server_close()
