"""Hot reload: file changes and SIGHUP swap the config atomically; an invalid file keeps the old one."""
from __future__ import annotations

import signal
import time

import pytest

from loopwarden.v1 import loopwarden_pb2 as pb

from tests.support.daemon import running_daemon
from tests.support.grpc_helpers import Stream, call, channel
from tests.support.metrics import value

pytestmark = pytest.mark.daemon


def _wait_for_reload(daemon, result: str, before: float, timeout: float = 10.0) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if value(daemon.scrape(), "loopwarden_config_reloads_total", result=result) > before:
            return
        time.sleep(0.05)
    raise AssertionError(f"no {result} reload within {timeout}s")


class TestReload:
    def test_new_thresholds_apply_to_the_next_event_of_a_live_run(self):
        """W=10 → 6 calls allowed; file changed to W=5 → the 7th call of the same run is warned."""
        with running_daemon("{tools: {loopDetection: {enabled: true}}}") as daemon:
            with channel(daemon.grpc_target) as ch, Stream(ch) as stream:
                assert {pb.ACTION_ALLOW} == {stream.one(call("hot-1", "read")).action for _ in range(6)}
                before = value(daemon.scrape(), "loopwarden_config_reloads_total", result="success")
                daemon.write_config("{tools: {loopDetection: {enabled: true, warningThreshold: 5}}}")
                _wait_for_reload(daemon, "success", before)
                verdict = stream.one(call("hot-1", "read"))
            assert (pb.ACTION_WARN, 6) == (verdict.action, verdict.count)
            assert 1 == value(daemon.scrape(), "loopwarden_config_last_reload_successful")

    def test_an_invalid_file_keeps_the_old_config_and_is_counted(self):
        """A broken file is refused: failure counter +1, gauge 0, old thresholds still decide, logged."""
        with running_daemon("{tools: {loopDetection: {enabled: true, warningThreshold: 3}}}") as daemon:
            before = value(daemon.scrape(), "loopwarden_config_reloads_total", result="failure")
            daemon.write_config("{tools: {loopDetection: {enabled: true, warningThreshold: 0}}}")
            _wait_for_reload(daemon, "failure", before)
            scrape = daemon.scrape()
            assert 0 == value(scrape, "loopwarden_config_last_reload_successful")
            with channel(daemon.grpc_target) as ch, Stream(ch) as stream:
                verdicts = [stream.one(call("cold-1", "read")) for _ in range(4)]
            assert [pb.ACTION_ALLOW] * 3 + [pb.ACTION_WARN] == [v.action for v in verdicts]
            line = daemon.wait_for_log(lambda l: l.get("msg", "").startswith("config reload refused"))
            assert "tools.loopDetection.warningThreshold" in line["error"]

    def test_sighup_reloads_at_once(self):
        """SIGHUP re-reads the file even before the poller would."""
        with running_daemon("{tools: {loopDetection: {enabled: true}}}", ["--config-poll", "3600"]) as daemon:
            daemon.config_path.write_text("{tools: {loopDetection: {enabled: true, warningThreshold: 2}}}")
            before = value(daemon.scrape(), "loopwarden_config_reloads_total", result="success")
            daemon.signal(signal.SIGHUP)
            _wait_for_reload(daemon, "success", before)
            with channel(daemon.grpc_target) as ch, Stream(ch) as stream:
                verdicts = [stream.one(call("hup-1", "read")).action for _ in range(3)]
            assert [pb.ACTION_ALLOW, pb.ACTION_ALLOW, pb.ACTION_WARN] == verdicts

    def test_an_unchanged_file_is_not_a_reload(self):
        """Touching the file without changing its content counts nothing."""
        with running_daemon("{}") as daemon:
            daemon.write_config("{}")
            time.sleep(0.5)
            assert 0 == value(daemon.scrape(), "loopwarden_config_reloads_total", result="success")

    def test_an_invalid_file_at_start_is_refused(self):
        """The daemon does not start on a bad config: exit 2 and the message names the field."""
        import subprocess
        import sys
        import tempfile
        with tempfile.NamedTemporaryFile("w", suffix=".json5") as bad:
            bad.write("{tools: {loopDetection: {historySize: 2.5}}}")
            bad.flush()
            result = subprocess.run([sys.executable, "-m", "loopwarden", "serve", "--config", bad.name,
                                     "--listen", "127.0.0.1:0", "--metrics-listen", "127.0.0.1:0"],
                                    capture_output=True, text=True, timeout=30)
        assert 2 == result.returncode
        assert "tools.loopDetection.historySize" in result.stderr
