"""Headless Chromium (Debian's `chromium`) driven over the DevTools protocol on a pipe.

`--remote-debugging-pipe` reads commands from fd 3 and writes replies and events to fd 4, each a
JSON message ending in NUL, so the standard library is the whole client: no driver binary, no
websocket package. The browser gets no network: every host name resolves to nothing and any
proxied request goes to a dead loopback port, so a page that tried to fetch something shows up as
a failed request instead of traffic leaving the machine.
"""
from __future__ import annotations

import base64
import fcntl
import json
import os
import shutil
import signal
import tempfile
import time
from dataclasses import dataclass, field
from typing import Any

CHROMIUM_NAMES = ("chromium", "chromium-browser")
INSTALL_HINT = "apt-get install chromium (or `bash scripts/install-test-tools.sh`)"
FLAGS = (
    "--headless", "--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage", "--remote-debugging-pipe",
    "--no-first-run", "--no-default-browser-check", "--disable-extensions", "--disable-default-apps",
    "--disable-background-networking", "--disable-component-update", "--disable-sync", "--no-pings",
    "--disable-domain-reliability", "--disable-client-side-phishing-detection", "--metrics-recording-only",
    "--disable-features=Translate,OptimizationHints,MediaRouter,AutofillServerCommunication",
    "--host-resolver-rules=MAP * ~NOTFOUND", "--proxy-server=http://127.0.0.1:9", "--hide-scrollbars",
    "--allow-file-access-from-files",
)


def find_chromium() -> str | None:
    for name in CHROMIUM_NAMES:
        path = shutil.which(name)
        if path:
            return path
    return None


class BrowserError(RuntimeError):
    pass


@dataclass
class PageVisit:
    """What loading one page produced."""

    url: str
    console_errors: list[str] = field(default_factory=list)
    requests: list[str] = field(default_factory=list)
    failed_requests: list[str] = field(default_factory=list)


class Chromium:
    """One headless browser; use as a context manager."""

    def __init__(self, executable: str, timeout: float = 30.0) -> None:
        self._executable = executable
        self._timeout = timeout
        self._next_id = 0
        self._buffer = b""
        self._events: list[dict] = []
        self._profile = tempfile.TemporaryDirectory(prefix="loopwarden-chromium-")
        commands_read, commands_write = os.pipe()
        replies_read, replies_write = os.pipe()
        # Above 10 first, so that placing them on 3 and 4 never overwrites one with the other.
        child_in = fcntl.fcntl(commands_read, fcntl.F_DUPFD_CLOEXEC, 10)
        child_out = fcntl.fcntl(replies_write, fcntl.F_DUPFD_CLOEXEC, 10)
        os.close(commands_read)
        os.close(replies_write)
        devnull = os.open(os.devnull, os.O_RDWR | os.O_CLOEXEC)
        try:
            self.pid = os.posix_spawn(
                executable, [executable, *FLAGS, f"--user-data-dir={self._profile.name}", "about:blank"],
                {**os.environ, "HOME": self._profile.name},
                file_actions=[(os.POSIX_SPAWN_DUP2, devnull, 0), (os.POSIX_SPAWN_DUP2, devnull, 1),
                              (os.POSIX_SPAWN_DUP2, devnull, 2), (os.POSIX_SPAWN_DUP2, child_in, 3),
                              (os.POSIX_SPAWN_DUP2, child_out, 4)])
        finally:
            for fd in (child_in, child_out, devnull):
                os.close(fd)
        self._write = commands_write
        self._read = replies_read
        self._session = ""

    def __enter__(self) -> Chromium:
        target = self.send("Target.createTarget", {"url": "about:blank"})["targetId"]
        self._session = self.send("Target.attachToTarget", {"targetId": target, "flatten": True})["sessionId"]
        for domain in ("Page", "Runtime", "Log", "Network"):
            self.send(f"{domain}.enable")
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.close()

    # -- protocol

    def _receive(self, deadline: float) -> dict:
        while b"\0" not in self._buffer:
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                raise BrowserError("chromium did not answer in time")
            import select
            ready, _, _ = select.select([self._read], [], [], remaining)
            if ready:
                chunk = os.read(self._read, 1 << 20)
                if not chunk:
                    raise BrowserError("chromium closed the DevTools pipe")
                self._buffer += chunk
        message, _, self._buffer = self._buffer.partition(b"\0")
        return json.loads(message)

    def send(self, method: str, params: dict | None = None, *, session: bool = True) -> dict:
        self._next_id += 1
        message: dict[str, Any] = {"id": self._next_id, "method": method, "params": params or {}}
        if session and self._session:
            message["sessionId"] = self._session
        os.write(self._write, json.dumps(message).encode() + b"\0")
        deadline = time.monotonic() + self._timeout
        while True:
            reply = self._receive(deadline)
            if reply.get("id") == self._next_id:
                if "error" in reply:
                    raise BrowserError(f"{method}: {reply['error']}")
                return reply.get("result", {})
            self._events.append(reply)

    def wait_for(self, method: str) -> dict:
        deadline = time.monotonic() + self._timeout
        while True:
            for index, event in enumerate(self._events):
                if event.get("method") == method:
                    return self._events.pop(index)
            self._events.append(self._receive(deadline))

    # -- what the tests use

    def visit(self, url: str, width: int = 960, height: int = 900) -> PageVisit:
        """Load `url` at that viewport, wait for its load event, and collect what it logged and requested."""
        self._events.clear()
        self.send("Emulation.setDeviceMetricsOverride",
                  {"width": width, "height": height, "deviceScaleFactor": 1, "mobile": False})
        self.send("Page.navigate", {"url": url})
        self.wait_for("Page.loadEventFired")
        self.evaluate("1")  # drains events queued before the load finished
        visit = PageVisit(url)
        for event in self._events:
            method, params = event.get("method"), event.get("params", {})
            if method == "Runtime.consoleAPICalled" and params.get("type") in ("error", "assert"):
                visit.console_errors.append(" ".join(str(arg.get("value", arg.get("description", "")))
                                                     for arg in params.get("args", [])))
            elif method == "Runtime.exceptionThrown":
                visit.console_errors.append(params.get("exceptionDetails", {}).get("text", "exception"))
            elif method == "Log.entryAdded" and params.get("entry", {}).get("level") == "error":
                visit.console_errors.append(params["entry"].get("text", ""))
            elif method == "Network.requestWillBeSent":
                visit.requests.append(params.get("request", {}).get("url", ""))
            elif method == "Network.loadingFailed":
                visit.failed_requests.append(params.get("errorText", ""))
        return visit

    def evaluate(self, expression: str) -> Any:
        result = self.send("Runtime.evaluate", {"expression": expression, "returnByValue": True})
        if "exceptionDetails" in result:
            raise BrowserError(f"{expression!r} raised {result['exceptionDetails'].get('text')}")
        return result.get("result", {}).get("value")

    def screenshot(self, path: str, width: int = 960) -> bytes:
        """The whole page (not only the viewport) as a PNG written to `path`."""
        height = int(self.evaluate("document.documentElement.scrollHeight"))
        data = self.send("Page.captureScreenshot", {
            "format": "png", "captureBeyondViewport": True,
            "clip": {"x": 0, "y": 0, "width": width, "height": height, "scale": 1}})["data"]
        png = base64.b64decode(data)
        with open(path, "wb") as handle:
            handle.write(png)
        return png

    def close(self) -> None:
        try:
            self.send("Browser.close", session=False)
        except (BrowserError, OSError):
            pass
        deadline = time.monotonic() + 10
        while time.monotonic() < deadline:
            pid, _status = os.waitpid(self.pid, os.WNOHANG)
            if pid:
                break
            time.sleep(0.05)
        else:
            os.kill(self.pid, signal.SIGKILL)
            os.waitpid(self.pid, 0)
        for fd in (self._write, self._read):
            try:
                os.close(fd)
            except OSError:
                pass
        self._profile.cleanup()
