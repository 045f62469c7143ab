"""Waiting on the state store's own word (its metrics), never on a sleep."""
from __future__ import annotations

import time

from tests.support.metrics import value


def wait_until_flushed(daemon, at_least: float = 1.0, timeout: float = 15.0) -> float:
    """Block until no run waits to be written and `at_least` runs were flushed; the flushed count."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        text = daemon.scrape()
        flushed = value(text, "loopwarden_state_runs_flushed_total")
        if value(text, "loopwarden_state_dirty_runs") == 0 and flushed >= at_least:
            return flushed
        time.sleep(0.05)
    raise AssertionError(f"runs not flushed within {timeout}s: {daemon.scrape()[-2000:]}")


def flushed_count(daemon) -> float:
    return value(daemon.scrape(), "loopwarden_state_runs_flushed_total")
