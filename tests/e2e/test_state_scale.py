"""bench/state_scale.py, smaller: many full runs flushed to the file store, all back after kill -9."""
from __future__ import annotations

import pytest

from bench.state_scale import run

pytestmark = pytest.mark.daemon


class TestScale:
    def test_every_run_is_back_after_a_full_flush_and_a_kill_9(self, tmp_path):
        """3,000 runs x 30 records: flushed on SIGTERM, restored, flushed live, killed, restored again."""
        figures = run(3000, 30, str(tmp_path))
        assert 3000 == figures["runs_restored"] == figures["runs_back_after_kill_9"]
        # Writing every run costs a transient, not a copy of the state (the old snapshot's 4x).
        assert figures["hwm_after_live_flush_mib"] < 1.5 * figures["steady_hwm_mib"]
        assert figures["state_file_mib"] < 0.01 * 3000  # ~2.7 KiB a run, well under 10 KiB
