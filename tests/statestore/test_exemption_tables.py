"""Standing exemptions (ASK's "always" answers) in the state store, over the compiled core: a
value of their own beside the runs, never read as a run, restored by the file store, and read by
another replica of a shared store when it meets the tenant."""
from __future__ import annotations

import asyncio
import time

import pytest
from loopwarden.v1 import loopwarden_pb2 as pb
from prometheus_client import CollectorRegistry

from loopwarden_server.config import load_config_text
from loopwarden_server.core import CoreService
from loopwarden_server.metrics import Metrics
from loopwarden_server.settings import Limits
from loopwarden_server.statestore.encoding import EncodingError, exemptions_key, key_parts, run_key
from loopwarden_server.statestore.file import FileStateStore
from loopwarden_server.statestore.keeper import StateKeeper
from loopwarden_server.statestore.metrics import StateMetrics
from loopwarden_server.statestore.runs import CoreRuns
from tests.statestore.test_keeper import MemoryStore

CONFIG = '{tools: {loopDetection: {enabled: true}}, loopwarden: {onCritical: "ask"}}'
X = '{"path":"/x"}'
SAME = '"same"'


def _replica(store) -> tuple[CoreService, StateKeeper]:
    core = CoreService(load_config_text(CONFIG), Metrics(CollectorRegistry()), Limits(), max_runs=100,
                       idle_ttl_seconds=3600, clock=time.monotonic)
    keeper = StateKeeper(store, CoreRuns(core), StateMetrics(CollectorRegistry()), flush_interval=0.05)
    return core, keeper


def _send(core: CoreService, *events: pb.Event, tenant: str = "t") -> list[pb.Verdict]:
    answer = core.evaluate(pb.EvaluateRequest(events=list(events)).SerializeToString(), tenant)
    return list(pb.EvaluateResponse.FromString(answer.response).verdicts)


def _call(run_id: str, call_id: str) -> pb.Event:
    return pb.Event(run_id=run_id, accepts_ask=True,
                    tool_call=pb.ToolCall(tool_name="read", params_json=X, tool_call_id=call_id))


def _outcome(run_id: str) -> pb.Event:
    return pb.Event(run_id=run_id, tool_outcome=pb.ToolOutcome(tool_name="read", params_json=X, result_json=SAME))


def _granted(core: CoreService, run_id: str) -> str:
    """20 identical rounds, the ASK, an "always": the exemption's id."""
    for i in range(20):
        _send(core, _call(run_id, f"c{i}"), _outcome(run_id))
    (asked,) = _send(core, _call(run_id, "asked"))
    assert pb.ACTION_ASK == asked.action
    (answered,) = _send(core, pb.Event(run_id=run_id, approval=pb.Approval(
        tool_call_id="asked", approved=True, scope=pb.APPROVAL_SCOPE_ALWAYS, ttl_seconds=600)))
    assert pb.ACTION_ALLOW == answered.action
    return asked.decision_id


def test_the_key_is_never_a_run_key():
    key = exemptions_key("t")
    assert key.startswith(b"{") and key != run_key("t", "")
    with pytest.raises(EncodingError):
        key_parts(key)


def test_the_file_store_restores_a_tenants_table_beside_its_runs(tmp_path):
    async def scenario():
        store = FileStateStore(str(tmp_path / "runs.state"))
        core, keeper = _replica(store)
        store.check()
        keeper.restore()
        exemption_id = _granted(core, "r1")
        assert await keeper.flush_once()
        assert 0 == keeper.waiting()
        # A new process on the same file.
        again = FileStateStore(str(tmp_path / "runs.state"))
        core2, keeper2 = _replica(again)
        keeper2.restore()
        return exemption_id, core2
    exemption_id, core2 = asyncio.run(scenario())
    (listed,) = core2.list_exemptions("t")
    assert (exemption_id, "read", "r1") == (listed.id, listed.tool_name, listed.run_id)
    assert listed.expires_at - listed.created_at == pytest.approx(600, abs=1)
    assert listed.created_at == pytest.approx(time.time(), abs=60), "wall-clock seconds"
    assert 1 == len(core2), "the run came back too, and the table was not taken for a run"
    assert [] == core2.list_exemptions("other-tenant")


def test_another_replica_reads_the_table_when_it_meets_the_tenant_and_sees_a_revoke():
    async def scenario():
        shared = MemoryStore()
        a, keeper_a = _replica(shared)
        b, keeper_b = _replica(shared)
        exemption_id = _granted(a, "r1")
        assert await keeper_a.flush_once()
        assert [] == b.list_exemptions("t"), "B has not met the tenant yet"
        await keeper_b.ensure_loaded("t", ["r2"])  # B's first event of a new run of the tenant
        seen_by_b = [e.id for e in b.list_exemptions("t")]
        # Revoked on B: written at B's next flush, read by A at its next load for the tenant.
        assert b.revoke_exemption(exemption_id, "t") is not None
        assert await keeper_b.flush_once()
        await keeper_a.load_exemptions("t")
        return exemption_id, seen_by_b, a, shared
    exemption_id, seen_by_b, a, shared = asyncio.run(scenario())
    assert [exemption_id] == seen_by_b
    assert [] == a.list_exemptions("t")
    assert exemptions_key("t") not in shared.data, "an emptied table is deleted"
