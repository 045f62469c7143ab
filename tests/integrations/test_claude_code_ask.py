"""ASK in a real headless Claude Code session (2.1.332, `claude -p`): under `onCritical: "ask"`
the 21st identical Bash call is answered `permissionDecision: "ask"`. A headless session cannot
put the question, so Claude Code denies the call and fires no hook that says so (no
PermissionDenied). The model tries the same call again: loopwarden takes the unanswered ask as
declined, and that next attempt is denied with loopwarden's reason at once, not asked again while
the daemon holds the first ask open for askTimeoutSeconds.

The model is the scripted stand-in of test_claude_code_plugin, which here tries again after the
first error and stops at the second.
"""
from __future__ import annotations

import pytest

from tests.e2e.test_hooks_http import daemon_args, hooks_address  # noqa: F401 - the daemon with its hook listener
from tests.integrations.test_claude_code_plugin import (  # noqa: F401 - claude: the pinned Claude Code
    CRITICAL, ScriptedModel, claude, claude_session, install_hooks_user, result_text,
)
from tests.support.metrics import delta
from tests.support.scripted_model import serving

pytestmark = pytest.mark.node

# The embedded default's detection with ASK on criticals, and an ask timeout far beyond the
# session's: a denial seen sooner can only be loopwarden reading the next attempt.
CONFIG = '{tools: {loopDetection: {enabled: true}}, loopwarden: {onCritical: "ask", askTimeoutSeconds: 3600}}'


HELD = "held for a person"  # the ask's reason


@pytest.fixture(scope="module")
def daemon_config() -> str:
    return CONFIG


def test_a_headless_sessions_unanswerable_ask_denies_the_next_attempt(claude, daemon, tmp_path):
    home = tmp_path / "home"
    home.mkdir()
    installed = install_hooks_user(home, tmp_path / "bin", f"http://{hooks_address(daemon)}")
    assert 0 == installed.returncode, installed.stderr
    before = daemon.scrape()

    with serving(ScriptedModel(limit=CRITICAL + 5, errors_to_stop=2)) as model:
        done = claude_session(claude, home, model, tmp_path / "workspace")

    after = daemon.scrape()
    assert 0 == done.returncode, done.stdout[-2000:] + done.stderr[-2000:]
    results = model.results
    assert CRITICAL + 2 == len(results), [result_text(result) for result in results]
    assert all(not result.get("is_error") and "looping" in result_text(result) for result in results[:CRITICAL])
    asked, next_attempt = results[CRITICAL], results[CRITICAL + 1]
    # Claude Code denied the asked call itself, with the ask's reason (what the prompt would show).
    assert asked.get("is_error") is True and HELD in result_text(asked)
    assert next_attempt.get("is_error") is True, "denied, not asked again"
    assert "CRITICAL: Bash was called 20 times with identical arguments" in result_text(next_attempt)
    assert HELD not in result_text(next_attempt)
    assert 1 == delta(before, after, "loopwarden_asks_total", detector="generic_repeat", agent="default")
    assert 1 == delta(before, after, "loopwarden_approvals_total", answer="denied", agent="default")
    assert 0 == delta(before, after, "loopwarden_approvals_total", answer="timed_out", agent="default")
