"""The reference engine (the oracle) writes the JSON-era record (tests/reference/codec.py): the
core reads it back as exactly the run it holds itself (its own stored message, field for field),
and a run handed through the state store's bytes, from the oracle to the core or from one core to
another, goes on exactly as if it had never moved.

Hypothesis drives both engines over the differential suite's event sequences (CI: the fixed-seed
`ci` profile; `LOOPWARDEN_HYPOTHESIS_PROFILE=long` for a long local run).
"""
from __future__ import annotations

import orjson
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from loopwarden.v1 import loopwarden_pb2 as pb

from google.protobuf.json_format import MessageToDict

from loopwarden_server.statestore.encoding import EncodingError
from loopwarden_server.statestore.runs import CoreRuns, Loaded
from tests.reference.runs import ReferenceRuns
from tests.core.harness import CoreEngine, ReferenceEngine, pb_event
from tests.core.strategies import event_sequences, scenario_configs
from tests.core.test_differential import LIMITS, SCALE
from tests.reference.codec import frame, unframe
from tests.support.stored import run_message

RUNS = [(tenant, run_id) for tenant in ("", "t1") for run_id in ("r1", "r2")]
BIG = 1000  # no max-runs eviction: a transfer keeps every run, so LRU order plays no part
TTL = 100.0


def _engines(config_text: str) -> tuple[ReferenceEngine, CoreEngine]:
    return (ReferenceEngine(config_text, LIMITS, max_runs=BIG, idle_ttl=TTL),
            CoreEngine(config_text, LIMITS, max_runs=BIG, idle_ttl=TTL))


def _kept(engine) -> ReferenceRuns | CoreRuns:
    return ReferenceRuns(engine.store) if engine.name == "reference" else CoreRuns(engine.service)


def _record(engine, tenant: str, run_id: str) -> dict | None:
    """The run as the core stores it: the core's own value, or the oracle's JSON-era value taken
    in by a scratch core and written again (without `last_seen`, a wall-clock time that goes
    through each engine's clock with float error)."""
    value = _kept(engine).encode(tenant, run_id, engine.clock.now)
    if value is None:
        return None
    if engine.name == "reference":
        scratch = CoreEngine("{}", LIMITS, max_runs=BIG, idle_ttl=1e12)
        scratch.clock.now = engine.clock.now
        assert Loaded.RESTORED == CoreRuns(scratch.service).take_in(value, engine.clock.now)
        value = CoreRuns(scratch.service).encode(tenant, run_id, engine.clock.now)
    message = run_message(value)
    message.last_seen = 0
    return MessageToDict(message, preserving_proto_field_name=True)


def _without_ids(verdicts: list[pb.Verdict]) -> list[pb.Verdict]:
    """Decision ids count per engine instance: a run moved to a new instance gets that one's."""
    for verdict in verdicts:
        verdict.decision_id = ""
    return verdicts


def _flat(record, path="run") -> dict:
    """A record as {path: leaf}, so a difference names its field."""
    if isinstance(record, dict):
        return {k: v for key, value in record.items() for k, v in _flat(value, f"{path}.{key}").items()}
    return {path: record}


@st.composite
def scripts(draw):
    """(events of one request, tenant, seconds passed before it) steps."""
    sequence = draw(event_sequences())
    script = []
    while sequence:
        size = draw(st.integers(min_value=1, max_value=4))
        script.append((sequence[:size], draw(st.sampled_from(["", "", "t1"])),
                       draw(st.sampled_from([0.0] * 6 + [5.0, 60.0]))))
        sequence = sequence[size:]
    return script


def _step(engine, batch, tenant: str, advance: float) -> list[pb.Verdict]:
    engine.clock.now += advance
    return engine.evaluate([pb_event(event) for event in batch], tenant)


class TestOneRecord:
    @given(scenario_configs(), scripts())
    @settings(max_examples=100 * SCALE)
    def test_the_oracles_record_reads_as_the_cores_own(self, config_text, script):
        """After every request, each run the oracle stored (JSON era) reads in the core as the
        message the core stores for it (the announced keys in the same order: it decides which
        one a full run forgets first)."""
        python, core = _engines(config_text)
        for step, (batch, tenant, advance) in enumerate(script):
            _step(python, batch, tenant, advance)
            _step(core, batch, tenant, advance)
            for key in RUNS:
                expected, got = _record(python, *key), _record(core, *key)
                assert _flat(expected) == _flat(got), f"step {step}, run {key}"


class TestHandOver:
    @given(scenario_configs(), scripts(), st.integers(min_value=0, max_value=12), st.sampled_from(["reference", "core"]))
    @settings(max_examples=100 * SCALE)
    def test_a_run_moved_between_engines_goes_on_as_if_it_never_moved(self, config_text, script, cut, first):
        """Run the first `cut` requests in one engine (the oracle, writing the JSON era's values,
        or a core), move every run through the stored bytes to a fresh core, run the rest there:
        the verdicts and InspectRun views are those of one Python engine that ran everything
        (decision ids aside)."""
        reference = ReferenceEngine(config_text, LIMITS, max_runs=BIG, idle_ttl=TTL)
        before, after = _engines(config_text)
        if first == "core":
            before = CoreEngine(config_text, LIMITS, max_runs=BIG, idle_ttl=TTL)
        for index, (batch, tenant, advance) in enumerate(script):
            if index == cut:
                after.clock.now = before.clock.now
                # runs idle past the TTL are not taken in (EXPIRED): both sides forget them first
                reference.store.expire_idle()
                before.store.expire_idle() if before.name == "reference" else before.service.expire_idle()
                for key in RUNS:
                    value = _kept(before).encode(*key, before.clock.now)
                    if value is not None:
                        assert Loaded.RESTORED == _kept(after).take_in(value, after.clock.now, expect=key)
            expected = _without_ids(_step(reference, batch, tenant, advance))
            engine = before if index < cut else after
            got = _without_ids(_step(engine, batch, tenant, advance))
            assert expected == got, f"step {index} ({engine.name}, moved after {cut})"
            if index >= cut:
                for tenant_name, run_id in RUNS:
                    view, moved = reference.inspect(run_id, tenant_name), engine.inspect(run_id, tenant_name)
                    assert (view is None) == (moved is None)
                    if view is not None:
                        for message in (view, moved):
                            del message.recent_verdicts[:]  # decisions of this instance, not stored
                            for name in _TREE_FIELDS:  # run trees are the core's alone
                                message.ClearField(name)
                        assert view == moved, f"step {index}: InspectRun {tenant_name}/{run_id}"


# InspectRun's run-tree fields: the reference engine has no run trees, so they are not compared.
_TREE_FIELDS = ("parent_run_id", "children", "root_run_id", "depth", "tree_totals", "run_totals")


def _looping_core() -> CoreEngine:
    core = CoreEngine("{tools: {loopDetection: {enabled: true}}}")
    events = []
    for seq in range(1, 24, 2):
        events.append(pb_event({"run_id": "r1", "kind": "tool_call", "tool_name": "read", "params_json": '{"p":1}', "seq": seq}))
        events.append(pb_event({"run_id": "r1", "kind": "tool_outcome", "tool_name": "read", "params_json": '{"p":1}',
                                "result_json": '{"same":true}', "seq": seq + 1}))
    verdicts = core.evaluate(events)
    assert pb.ACTION_WARN in [v.action for v in verdicts]
    return core


def _looping_reference() -> ReferenceEngine:
    """_looping_core's run in the oracle (it writes the JSON era's record)."""
    oracle = ReferenceEngine("{tools: {loopDetection: {enabled: true}}}")
    events = []
    for seq in range(1, 24, 2):
        events.append(pb_event({"run_id": "r1", "kind": "tool_call", "tool_name": "read", "params_json": '{"p":1}', "seq": seq}))
        events.append(pb_event({"run_id": "r1", "kind": "tool_outcome", "tool_name": "read", "params_json": '{"p":1}',
                                "result_json": '{"same":true}', "seq": seq + 1}))
    oracle.evaluate(events)
    return oracle


class TestTakingIn:
    def test_expired_and_mismatched_runs_are_not_taken_in(self):
        core = _looping_core()
        value = CoreRuns(core.service).encode("", "r1", core.clock.now)
        fresh = CoreEngine("{tools: {loopDetection: {enabled: true}}}", idle_ttl=TTL)
        kept = CoreRuns(fresh.service)
        assert Loaded.EXPIRED == kept.take_in(value, core.clock.now + TTL + 1)
        assert Loaded.MISMATCH == kept.take_in(value, core.clock.now, expect=("", "other"))
        assert 0 == len(kept)
        assert Loaded.RESTORED == kept.take_in(value, core.clock.now, expect=("", "r1"))
        assert 1 == len(kept) and kept.held("", "r1")

    @pytest.mark.parametrize("mutate, field", [
        (lambda r: r["state"]["history"].update(args="00"), "run.state.history columns disagree in length"),
        (lambda r: r["state"]["history"].update(status="zz" * len(r["state"]["history"]["tools"])), "run.state.history.status is not hex"),
        (lambda r: r["state"].pop("blocks"), 'run.state has no field "blocks"'),
        (lambda r: r.update(run_id=7), "run.run_id is not a string"),
        (lambda r: r["retries"].update(next_slot=64), "run.retries.next_slot is out of range"),
        (lambda r: r["state"].update(abort={**r["retries"]["decisions"][next(iter(r["retries"]["decisions"]))]["verdict"],
                                            "error_code": "made_up"}), "run.state.abort.error_code is not an error code"),
    ])
    def test_a_malformed_record_is_refused_naming_the_field(self, mutate, field):
        """A JSON-era record: both engines refuse it with EncodingError; the core's message names
        the field's path."""
        core = _looping_core()
        oracle = _looping_reference()
        record = orjson.loads(unframe(ReferenceRuns(oracle.store).encode("", "r1", core.clock.now)))
        mutate(record)
        value = frame(orjson.dumps(record))
        with pytest.raises(EncodingError, match=field.replace("[", r"\[").replace("(", r"\(")):
            CoreRuns(CoreEngine("{}").service).take_in(value, core.clock.now)
        with pytest.raises(EncodingError):
            ReferenceRuns(ReferenceEngine("{}").store).take_in(value, core.clock.now)

    @given(st.binary(max_size=64), st.integers(min_value=0, max_value=4000))
    @settings(max_examples=200)
    def test_corrupt_bytes_never_crash_the_core(self, junk, at):
        """Any bytes spliced into a good record (this format's, and the JSON era's inside its
        framing): taken in or refused with EncodingError, nothing else."""
        core = _looping_core()
        value = CoreRuns(core.service).encode("", "r1", core.clock.now)
        text = unframe(ReferenceRuns(_looping_reference().store).encode("", "r1", core.clock.now))
        kept = CoreRuns(CoreEngine("{}").service)
        for spliced in (value[:min(at, len(value))] + junk + value[min(at, len(value)) + len(junk) // 2:],
                        frame(text[:min(at, len(text))] + junk + text[min(at, len(text)) + len(junk) // 2:])):
            try:
                kept.take_in(spliced, core.clock.now)
            except EncodingError:
                pass
