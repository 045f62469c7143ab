"""Properties of fingerprints and run isolation that must hold for any input."""
from __future__ import annotations

import json

from hypothesis import given, settings
from hypothesis import strategies as st

from tests.reference.engine import DEFAULT_TOOL_CATALOG, LoopDetectionSettings
from tests.reference.engine.fingerprints import args_hash, outcome_fingerprint
from tests.reference.engine.jsonvalues import decode_json
from tests import strategies as s
from tests.engine.driver import R, Run

DETECTING = LoopDetectionSettings(enabled=True, warning_threshold=3, critical_threshold=5,
                                  global_circuit_breaker_threshold=7, unknown_tool_threshold=3)


def _result_hash(tool: str, params: dict, result: dict) -> str:
    decoded_params = decode_json(json.dumps(params))
    decoded_result = decode_json(json.dumps(result))
    fingerprint = outcome_fingerprint(tool, decoded_params, decoded_result, None, DEFAULT_TOOL_CATALOG, has_result=True)
    assert fingerprint.result_hash is not None
    return fingerprint.result_hash


class TestArgsHash:
    @given(s.tool_names, s.json_objects, st.integers())
    def test_key_order_never_changes_the_args_hash(self, tool, params, seed):
        """The same params with keys in any order hash alike."""
        reordered = s.reorder_keys(params, seed)
        assert args_hash(tool, decode_json(json.dumps(params))) == args_hash(tool, decode_json(json.dumps(reordered)))

    @given(st.integers(min_value=-(2**53), max_value=2**53))
    def test_integral_floats_hash_like_integers(self, number):
        """1 and 1.0 are the same argument."""
        assert args_hash("t", decode_json(f'{{"n": {number}}}')) == args_hash("t", decode_json(f'{{"n": {number}.0}}'))

    @given(s.tool_names, s.json_objects, s.json_objects)
    def test_different_params_hash_differently(self, tool, first, second):
        """Distinct canonical params never collide."""
        a, b = decode_json(json.dumps(first)), decode_json(json.dumps(second))
        if json.dumps(a, sort_keys=True) != json.dumps(b, sort_keys=True):
            assert args_hash(tool, a) != args_hash(tool, b)


class TestExecOutcomes:
    @given(s.exec_statuses, s.exit_codes, s.exec_outputs, s.exec_volatile, s.exec_volatile)
    def test_volatile_exec_fields_never_count(self, status, exit_code, output, first, second):
        """Durations, PIDs, cwd, session ids and start times never enter the hash."""
        base = {"status": status, "exitCode": exit_code, "aggregated": output}
        one = {"content": [], "details": {**base, **first}}
        two = {"content": [], "details": {**base, **second}}
        assert _result_hash("exec", {"command": "x"}, one) == _result_hash("exec", {"command": "x"}, two)

    @given(s.exec_statuses, s.exit_codes, s.exec_outputs, s.exec_volatile,
           st.sampled_from(["status", "exitCode", "output", "timedOut"]))
    def test_meaningful_exec_fields_change_the_hash(self, status, exit_code, output, volatile, changed):
        """Status, exit code, timeout and output are progress."""
        base = {"status": status, "exitCode": exit_code, "aggregated": output.strip() or "x", **volatile}
        other = dict(base)
        if changed == "status":
            other["status"] = "failed" if status == "completed" else "completed"
        elif changed == "exitCode":
            other["exitCode"] = exit_code + 1
        elif changed == "timedOut":
            other["timedOut"] = True
        else:
            other["aggregated"] = base["aggregated"] + " more"
        assert _result_hash("exec", {}, {"details": base}) != _result_hash("exec", {}, {"details": other})


class TestSendOutcomes:
    @given(s.send_volatile, s.send_volatile, st.text(max_size=10))
    def test_volatile_delivery_ids_never_count(self, first, second, channel):
        """Two sends of the same message differ only in delivery ids: same result."""
        params = {"action": "send", "target": "chat:1", "text": "ping"}
        stable = {"ok": True, "channel": channel, "to": "chat:1"}
        one = {"content": [{"type": "text", "text": "sent 1"}], "details": {**stable, **first}}
        two = {"content": [{"type": "text", "text": "sent 2"}], "details": {**stable, **second}}
        assert _result_hash("message", params, one) == _result_hash("message", params, two)

    @given(s.send_volatile, st.text(min_size=1, max_size=10))
    def test_non_volatile_send_fields_change_the_hash(self, volatile, channel):
        """A different destination or status is a different result."""
        params = {"action": "send", "target": "chat:1"}
        one = {"details": {"ok": True, "channel": channel, **volatile}}
        two = {"details": {"ok": False, "channel": channel, **volatile}}
        assert _result_hash("message", params, one) != _result_hash("message", params, two)


class TestGenericOutcomes:
    @given(s.tool_names.filter(lambda t: t not in ("exec", "process", "message")), s.json_objects,
           st.text(max_size=20), st.text(max_size=20))
    def test_any_change_in_details_or_text_changes_the_hash(self, tool, details, text, other_text):
        """For ordinary tools every field of details and the text count."""
        one = {"content": [{"type": "text", "text": text}], "details": details}
        two = {"content": [{"type": "text", "text": other_text}], "details": details}
        if text.strip() != other_text.strip():
            assert _result_hash(tool, {}, one) != _result_hash(tool, {}, two)
        changed = {"content": one["content"], "details": {**details, "__changed__": 1}}
        assert _result_hash(tool, {}, one) != _result_hash(tool, {}, changed)


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
    @settings(max_examples=60)
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
        assert alone == mixed_b


def _without_seqs(steps):
    from dataclasses import replace
    return [[replace(v, evidence_seqs=()) for v in verdicts] for verdicts in steps]


class TestVetoOutcomes:
    @settings(max_examples=80)
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


def _has_float(value) -> bool:
    if isinstance(value, float):
        return True
    if isinstance(value, dict):
        return any(_has_float(item) for item in value.values())
    if isinstance(value, list):
        return any(_has_float(item) for item in value)
    return False


class TestCanonicalEncoder:
    """orjson is the canonical encoder on the hot path; it must follow the same rules as the stdlib one."""

    @given(s.json_values)
    def test_orjson_and_stdlib_agree_apart_from_float_spelling(self, value):
        """Both encoders give the same document; the text is identical unless a non-integral float is spelled differently."""
        from tests.reference.engine.jsonvalues import _stdlib_encode, canonical_bytes

        decoded = decode_json(json.dumps(value))
        fast = canonical_bytes(decoded).decode("utf-8", "surrogatepass")
        slow = _stdlib_encode(decoded)
        assert json.loads(slow) == json.loads(fast)
        if not _has_float(decoded):
            assert slow == fast

    @given(s.json_values)
    def test_canonical_text_round_trips_to_the_same_value(self, value):
        """Decoding the canonical text gives back the decoded value: nothing is lost or reordered into a new value."""
        from tests.reference.engine.jsonvalues import canonical_json

        decoded = decode_json(json.dumps(value))
        assert decoded == decode_json(canonical_json(decoded))
