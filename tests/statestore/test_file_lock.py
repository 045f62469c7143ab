"""One daemon per state file: the file store is one replica's. A second daemon given the same file
refuses to start (exit 2) with one line naming the file, the holder's pid and how to pick another;
once the first daemon is gone, however it went (SIGTERM or SIGKILL), the file is free again."""
from __future__ import annotations

import re
import signal

import pytest

from tests.support.daemon import running_daemon

pytestmark = pytest.mark.daemon


def test_a_second_daemon_on_the_same_state_file_refuses_to_start_naming_the_holder(tmp_path):
    state = tmp_path / "runs.state"
    args = ["--state-store", f"file:{state}"]
    with running_daemon(None, args) as first:
        with pytest.raises(RuntimeError) as refused:
            with running_daemon(None, args):
                pass
        holder = first.process.pid
    message = str(refused.value)
    assert "exit 2" in message
    assert re.search(rf"state store {re.escape(str(state))} is in use by another loopwarden daemon \(pid {holder}\)", message), message
    assert "--state-store file:PATH" in message and "SERVE_STATE=file:PATH" in message


@pytest.mark.parametrize("how", [signal.SIGTERM, signal.SIGKILL], ids=["stopped", "killed"])
def test_the_file_is_free_again_once_its_daemon_is_gone(tmp_path, how):
    state = tmp_path / "runs.state"
    args = ["--state-store", f"file:{state}"]
    with running_daemon(None, args) as first:
        first.process.send_signal(how)
        first.process.wait(timeout=30)
    with running_daemon(None, args) as second:
        assert second.process.poll() is None, "the second daemon serves"
