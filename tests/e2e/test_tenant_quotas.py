"""Per-tenant quotas through the real daemon: with two tenants in the token file, one tenant's
flood of new runs evicts only its own oldest runs, and one tenant's streams cannot take the
other's share; a single-tenant daemon keeps one pool."""
from __future__ import annotations

import queue
import time

import grpc
import pytest
from loopwarden.v1 import loopwarden_pb2 as pb
from loopwarden.v1 import loopwarden_pb2_grpc as pb_grpc

from tests.support.daemon import running_daemon
from tests.support.grpc_helpers import SAME, Stream, call, channel, outcome
from tests.support.metrics import delta, value

pytestmark = pytest.mark.daemon

TOKENS = "alpha alpha-token\nbeta beta-token\n"
ALPHA, BETA = "alpha-token", "beta-token"
ENABLED = "{tools: {loopDetection: {enabled: true}}}"


def bearer(token: str) -> tuple:
    return (("authorization", f"Bearer {token}"),)


def repeat(stream: Stream, run_id: str, calls: range) -> list[pb.Verdict]:
    """Each call of `calls` (1-based) as an identical call, then its identical outcome: the call verdicts."""
    verdicts = []
    for n in calls:
        verdicts.append(stream.one(call(run_id, "read", seq=2 * n - 1)))
        stream.one(outcome(run_id, "read", result_json=SAME, seq=2 * n))
    return verdicts


def held(stub, run_id: str, token: str) -> bool:
    try:
        stub.InspectRun(pb.InspectRunRequest(run_id=run_id), metadata=bearer(token))
        return True
    except grpc.RpcError as exc:
        assert grpc.StatusCode.NOT_FOUND == exc.code()
        return False


@pytest.fixture
def token_file(tmp_path):
    path = tmp_path / "tokens"
    path.write_text(TOKENS)
    return path


def test_a_tenant_flooding_new_runs_evicts_only_its_own_oldest(token_file):
    """The issue's figures: --max-runs 1,000 with two tenants, a quota of 500 runs each. beta's
    run makes 15 identical calls, alpha then creates 5,000 runs (10x its quota), and beta's run
    goes on: its first BLOCK is still call 21 (WARN from 11) with every record kept, alpha holds
    exactly its 500 newest runs, and the 4,500 evictions are counted as alpha's `tenant_quota`,
    none as `max_runs`."""
    with running_daemon(ENABLED, ["--auth-token-file", str(token_file), "--max-runs", "1000",
                                  "--tenant-label", "true"]) as daemon:
        with channel(daemon.grpc_target) as ch:
            stub = pb_grpc.LoopDetectionServiceStub(ch)
            with Stream(ch, bearer(BETA)) as beta:
                first = repeat(beta, "beta-loop", range(1, 16))
                before = daemon.scrape()
                with Stream(ch, bearer(ALPHA)) as alpha:
                    for batch in range(10):
                        alpha.send(*(call(f"alpha-{index}", "read", seq=1)
                                     for index in range(500 * batch, 500 * (batch + 1))))
                after = daemon.scrape()
                rest = repeat(beta, "beta-loop", range(16, 22))
            alpha_held = [index for index in (0, 4499, 4500, 4999) if held(stub, f"alpha-{index}", ALPHA)]
            beta_view = stub.InspectRun(pb.InspectRunRequest(run_id="beta-loop"), metadata=bearer(BETA))

    actions = [v.action for v in first + rest]
    assert [pb.ACTION_ALLOW] * 10 + [pb.ACTION_WARN] * 10 + [pb.ACTION_BLOCK] == actions
    assert [4500, 4999] == alpha_held
    assert 21 == len(beta_view.records), "beta keeps every record of its run"
    assert 501 == value(after, "loopwarden_active_runs")
    assert 4500 == delta(before, after, "loopwarden_run_evictions_total", reason="tenant_quota", tenant="alpha")
    assert 0 == delta(before, after, "loopwarden_run_evictions_total", reason="max_runs", tenant="alpha")


def test_alpha_holds_exactly_its_newest_runs(token_file):
    """--max-runs 20, two tenants: a quota of 10. After alpha's 100 runs, the runs alpha still
    holds are exactly its 10 newest."""
    with running_daemon(ENABLED, ["--auth-token-file", str(token_file), "--max-runs", "20"]) as daemon:
        with channel(daemon.grpc_target) as ch:
            stub = pb_grpc.LoopDetectionServiceStub(ch)
            with Stream(ch, bearer(ALPHA)) as alpha:
                for index in range(100):
                    alpha.one(call(f"alpha-{index}", "read", seq=1))
            alpha_held = [index for index in range(100) if held(stub, f"alpha-{index}", ALPHA)]

    assert list(range(90, 100)) == alpha_held


def test_the_config_sets_a_tenants_run_quota(token_file):
    """`loopwarden.tenantMaxRuns: 3` overrides the equal share (here 50): alpha's fourth run
    evicts its first, and beta's runs stay."""
    with running_daemon("{tools: {loopDetection: {enabled: true}}, loopwarden: {tenantMaxRuns: 3}}",
                        ["--auth-token-file", str(token_file), "--max-runs", "100"]) as daemon:
        with channel(daemon.grpc_target) as ch:
            stub = pb_grpc.LoopDetectionServiceStub(ch)
            for index in range(3):
                stub.Check(pb.CheckRequest(event=call(f"beta-{index}", "read")), metadata=bearer(BETA))
            for index in range(4):
                stub.Check(pb.CheckRequest(event=call(f"alpha-{index}", "read")), metadata=bearer(ALPHA))
            alpha_held = [index for index in range(4) if held(stub, f"alpha-{index}", ALPHA)]
            beta_held = [index for index in range(3) if held(stub, f"beta-{index}", BETA)]

    assert [1, 2, 3] == alpha_held
    assert [0, 1, 2] == beta_held


class _OpenStream:
    """An Evaluate stream that sends one event and stays open until closed."""

    def __init__(self, ch: grpc.Channel, token: str, run_id: str) -> None:
        self.requests: queue.Queue = queue.Queue()
        self.requests.put(pb.EvaluateRequest(events=[call(run_id, "read")]))
        self.responses = pb_grpc.LoopDetectionServiceStub(ch).Evaluate(iter(self.requests.get, None),
                                                                         metadata=bearer(token))

    def first(self) -> grpc.StatusCode | str:
        """"open" once the first answer came, else the status the stream ended with."""
        try:
            next(self.responses)
            return "open"
        except grpc.RpcError as exc:
            self.error = exc
            return exc.code()

    def close(self) -> None:
        self.requests.put(None)
        for _ in self.responses:
            pass


def test_a_tenant_over_its_stream_share_is_refused_while_the_other_still_opens_streams(token_file):
    """--max-streams 4 with two tenants: 2 streams each. alpha's third is RESOURCE_EXHAUSTED
    naming its share (counted); beta still opens both of its own; alpha gets a slot back when one
    of its streams closes; `tenantMaxStreams: 3` in a reloaded config raises alpha's share."""
    with running_daemon(ENABLED, ["--auth-token-file", str(token_file), "--max-streams", "4"]) as daemon:
        with channel(daemon.grpc_target) as ch:
            alpha = [_OpenStream(ch, ALPHA, f"a-{index}") for index in range(2)]
            assert ["open", "open"] == [s.first() for s in alpha]
            before = daemon.scrape()
            refused = _OpenStream(ch, ALPHA, "a-extra")
            assert grpc.StatusCode.RESOURCE_EXHAUSTED == refused.first()
            assert "2 of 4" in refused.error.details() and "2 tenants" in refused.error.details()
            after = daemon.scrape()
            beta = [_OpenStream(ch, BETA, f"b-{index}") for index in range(2)]
            assert ["open", "open"] == [s.first() for s in beta]

            alpha.pop().close()
            again = _OpenStream(ch, ALPHA, "a-again")
            assert "open" == again.first()
            alpha.append(again)

            # The global cap (4) is full: one of beta's closes, so only alpha's share is in the way.
            beta.pop().close()
            assert grpc.StatusCode.RESOURCE_EXHAUSTED == _OpenStream(ch, ALPHA, "a-over").first()
            daemon.write_config("{tools: {loopDetection: {enabled: true}}, loopwarden: {tenantMaxStreams: 3}}")
            daemon.wait_for_log(lambda line: line.get("msg") == "config reloaded")
            third = _OpenStream(ch, ALPHA, "a-third")
            assert "open" == third.first()
            for stream in [*alpha, third, *beta]:
                stream.close()

    assert 1 == delta(before, after, "loopwarden_rejected_requests_total", reason="tenant_streams")


def test_one_tenant_keeps_one_pool(tmp_path):
    """A single token (one tenant): no quota, --max-runs evicts the least recently used run of the
    one pool (`max_runs`) and any number of streams up to --max-streams is admitted."""
    token_file = tmp_path / "token"
    token_file.write_text("only-token\n")
    with running_daemon(ENABLED, ["--auth-token-file", str(token_file), "--max-runs", "4"]) as daemon:
        with channel(daemon.grpc_target) as ch:
            stub = pb_grpc.LoopDetectionServiceStub(ch)
            before = daemon.scrape()
            for index in range(6):
                stub.Check(pb.CheckRequest(event=call(f"run-{index}", "read")), metadata=bearer("only-token"))
            after = daemon.scrape()
            kept = [index for index in range(6) if held(stub, f"run-{index}", "only-token")]

    assert [2, 3, 4, 5] == kept
    assert 2 == delta(before, after, "loopwarden_run_evictions_total", reason="max_runs")
    assert 0 == delta(before, after, "loopwarden_run_evictions_total", reason="tenant_quota")


def test_a_second_tenant_added_to_the_token_file_turns_the_shares_on(tmp_path):
    """One tenant: one pool, no tenant_quota eviction. The token file is rotated to name a second
    tenant: within the token file's check (a second) plus the sweep, alpha's share is 5 of
    --max-runs 10, so its sixth run evicts its own first."""
    token_file = tmp_path / "tokens"
    token_file.write_text("alpha alpha-token\n")
    with running_daemon(ENABLED, ["--auth-token-file", str(token_file), "--max-runs", "10"]) as daemon:
        with channel(daemon.grpc_target) as ch:
            stub = pb_grpc.LoopDetectionServiceStub(ch)
            for index in range(8):
                stub.Check(pb.CheckRequest(event=call(f"one-pool-{index}", "read")), metadata=bearer(ALPHA))
            one_pool = daemon.scrape()
            rotated = tmp_path / "tokens.new"
            rotated.write_text(TOKENS)
            rotated.replace(token_file)
            deadline = time.monotonic() + 10
            while time.monotonic() < deadline:  # beta's token works once the new file is read
                try:
                    stub.Check(pb.CheckRequest(event=call("beta-run", "read")), metadata=bearer(BETA))
                    break
                except grpc.RpcError:
                    time.sleep(0.1)
            time.sleep(2.5)  # the next sweep sets the shares from the new file
            before = daemon.scrape()
            stub.Check(pb.CheckRequest(event=call("alpha-new", "read")), metadata=bearer(ALPHA))
            after = daemon.scrape()
            alpha_held = [index for index in range(8) if held(stub, f"one-pool-{index}", ALPHA)]

    assert 0 == value(one_pool, "loopwarden_run_evictions_total", reason="tenant_quota")
    assert 4 == delta(before, after, "loopwarden_run_evictions_total", reason="tenant_quota")
    assert [4, 5, 6, 7] == alpha_held
