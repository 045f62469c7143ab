"""Properties of run isolation and of the detector's own vetoes that must hold for any events.
The fingerprints' properties are stated for both engines in tests/differential/test_fingerprints.py."""
from __future__ import annotations

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from loopwarden_server.config.detection import LoopDetectionSettings
from tests import strategies as s
from tests.engine.driver import R, Run, fields_of

DETECTING = LoopDetectionSettings(enabled=True, warning_threshold=3, critical_threshold=5,
                                  global_circuit_breaker_threshold=7, unknown_tool_threshold=3)
# tests/differential collects these classes a second time (paired with the reference engine), so
# Hypothesis sees one test run by two collectors; each example builds its own runs, nothing is shared.
TWICE_COLLECTED = [HealthCheck.differing_executors]


def _play(run: Run, script) -> list:
    verdicts = []
    for kind, tool, params, result in script:
        body = R(result) if result != "error" else None
        error = "boom" if result == "error" else None
        if kind == "call":
            verdicts.append(run.call(tool, params))
        elif kind == "outcome":
            verdicts.append(run.outcome(tool, params, body, error=error))
        elif kind == "veto":
            verdicts.append(run.outcome(tool, params, {"details": {"status": "blocked", "deniedReason": "tool-loop"}}))
        else:
            verdicts.extend(run.done(tool, params, body, error=error))
    return verdicts


class TestRunIsolation:
    @settings(max_examples=60, suppress_health_check=TWICE_COLLECTED)
    @given(s.event_scripts(), s.event_scripts(), st.lists(st.booleans(), max_size=80))
    def test_events_of_one_run_never_change_another_runs_verdicts(self, script_a, script_b, interleave):
        """Run B's verdicts are the same whether or not run A's events are interleaved with them."""
        alone = _play(Run(DETECTING), script_b)

        run_a, run_b = Run(DETECTING), Run(DETECTING)
        a_steps, b_steps, mixed_b = list(script_a), list(script_b), []
        for pick_a in interleave + [False] * len(b_steps):
            if pick_a and a_steps:
                _play(run_a, [a_steps.pop(0)])
            elif b_steps:
                mixed_b.extend(_play(run_b, [b_steps.pop(0)]))
        assert [fields_of(v) for v in alone] == [fields_of(v) for v in mixed_b]


def _without_seqs(steps):
    return [[fields_of(v, evidence_seqs=False) for v in verdicts] for verdicts in steps]


class TestVetoOutcomes:
    @settings(max_examples=80, suppress_health_check=TWICE_COLLECTED)
    @given(s.event_scripts(), st.integers(min_value=0, max_value=40), s.tool_names,
           st.sampled_from([{"path": "/a"}, {"path": "/b"}, {"action": "poll", "sessionId": "s"}]))
    def test_a_loop_veto_never_changes_any_streak(self, script, position, tool, params):
        """Inserting the detector's own veto outcome anywhere changes no later verdict."""
        position = min(position, len(script))
        veto = ("veto", tool, params, "same")
        probe = ("call", "read", {"path": "/a"}, "same")
        plain_run, veto_run = Run(DETECTING), Run(DETECTING)
        plain = [_play(plain_run, [step]) for step in script + [probe]]
        with_veto = [_play(veto_run, [step]) for step in script[:position] + [veto] + script[position:] + [probe]]
        del with_veto[position]
        # The inserted event shifts every later seq, so evidence seqs differ; all else must not.
        assert _without_seqs(plain) == _without_seqs(with_veto)
        assert [(r.args_hash, r.result_hash) for r in plain_run.state.records] == [
            (r.args_hash, r.result_hash) for r in veto_run.state.records
        ]
