"""Tenants stay apart; stream slots are not forever; a config that was unreadable is reloaded."""
from __future__ import annotations

import os
import queue
import threading
import time

import grpc
import pytest
from loopwarden.v1 import loopwarden_pb2 as pb
from loopwarden.v1 import loopwarden_pb2_grpc as pb_grpc

from tests.support.daemon import running_daemon
from tests.support.grpc_helpers import SAME, Stream, call, channel, outcome
from tests.support.metrics import delta, value

pytestmark = pytest.mark.daemon

TOKENS = "# two tenants\nalpha alpha-token-1\nbeta beta-token-2\n"
ENABLED = "{tools: {loopDetection: {enabled: true}}}"


@pytest.fixture(scope="module")
def tenant_daemon(tmp_path_factory):
    token_file = tmp_path_factory.mktemp("tokens") / "tokens"
    token_file.write_text(TOKENS)
    with running_daemon(ENABLED, ["--auth-token-file", str(token_file), "--tenant-label", "true"]) as handle:
        yield handle


def bearer(token: str) -> tuple:
    return (("authorization", f"Bearer {token}"),)


class TestTenants:
    def test_one_run_id_is_two_runs_for_two_tenants(self, tenant_daemon):
        """alpha's 20 identical calls and outcomes do not count for beta's run of the same id:
        alpha's 21st call is BLOCK, beta's first ALLOW; each sees only its own records."""
        with channel(tenant_daemon.grpc_target) as ch:
            with Stream(ch, bearer("alpha-token-1")) as alpha:
                for index in range(20):
                    alpha.send(call("shared-run", "read", seq=2 * index + 1),
                               outcome("shared-run", "read", result_json=SAME, seq=2 * index + 2))
                alpha_21 = alpha.one(call("shared-run", "read", seq=41))
            with Stream(ch, bearer("beta-token-2")) as beta:
                beta_1 = beta.one(call("shared-run", "read", seq=1))
            stub = pb_grpc.LoopDetectionServiceStub(ch)
            alpha_view = stub.InspectRun(pb.InspectRunRequest(run_id="shared-run"), metadata=bearer("alpha-token-1"))
            beta_view = stub.InspectRun(pb.InspectRunRequest(run_id="shared-run"), metadata=bearer("beta-token-2"))

        assert (pb.ACTION_BLOCK, pb.ACTION_ALLOW) == (alpha_21.action, beta_1.action)
        assert (20, 1) == (len(alpha_view.records), len(beta_view.records))

    def test_a_tenant_cannot_inspect_or_end_another_tenants_run(self, tenant_daemon):
        """beta's InspectRun of alpha's run is NOT_FOUND, and beta's run_end leaves it in place."""
        with channel(tenant_daemon.grpc_target) as ch:
            stub = pb_grpc.LoopDetectionServiceStub(ch)
            stub.Check(pb.CheckRequest(event=call("alpha-only", "read")), metadata=bearer("alpha-token-1"))
            with pytest.raises(grpc.RpcError) as failure:
                stub.InspectRun(pb.InspectRunRequest(run_id="alpha-only"), metadata=bearer("beta-token-2"))
            stub.Check(pb.CheckRequest(event=pb.Event(run_id="alpha-only", run_end=pb.RunEnd())),
                       metadata=bearer("beta-token-2"))
            still = stub.InspectRun(pb.InspectRunRequest(run_id="alpha-only"), metadata=bearer("alpha-token-1"))

        assert grpc.StatusCode.NOT_FOUND == failure.value.code()
        assert 1 == len(still.records)

    def test_tenant_label_names_only_tenants_of_the_token_file(self, tenant_daemon):
        """With --tenant-label, verdicts count under the tenant's name."""
        before = tenant_daemon.scrape()
        with channel(tenant_daemon.grpc_target) as ch:
            pb_grpc.LoopDetectionServiceStub(ch).Check(pb.CheckRequest(event=call("labelled", "read")),
                                                       metadata=bearer("beta-token-2"))
        after = tenant_daemon.scrape()

        assert 1 == delta(before, after, "loopwarden_verdicts_total", action="allow", detector="none",
                          agent="default", integration="grpc", tenant="beta")

    def test_an_unknown_token_is_refused_and_counted(self, tenant_daemon):
        before = tenant_daemon.scrape()
        with channel(tenant_daemon.grpc_target) as ch, pytest.raises(grpc.RpcError) as failure:
            pb_grpc.LoopDetectionServiceStub(ch).Check(pb.CheckRequest(event=call("x", "read")),
                                                       metadata=bearer("gamma-token"))
        after = tenant_daemon.scrape()

        assert grpc.StatusCode.UNAUTHENTICATED == failure.value.code()
        assert 1 == delta(before, after, "loopwarden_auth_failures_total", reason="invalid_token")


class _HeldStream:
    """A sync-client Evaluate stream that sends one event and then stays open until released."""

    def __init__(self, ch: grpc.Channel, index: int) -> None:
        self.requests: queue.Queue = queue.Queue()
        self.requests.put(pb.EvaluateRequest(events=[call(f"held-{index}", "read")]))
        self.responses = pb_grpc.LoopDetectionServiceStub(ch).Evaluate(iter(self.requests.get, None))
        self.outcome: grpc.StatusCode | str | None = None

    def first(self) -> None:
        try:
            next(self.responses)
            self.outcome = "open"
        except grpc.RpcError as exc:
            self.outcome = exc.code()

    def wait_closed(self) -> grpc.StatusCode | None:
        try:
            for _ in self.responses:
                pass
        except grpc.RpcError as exc:
            return exc.code()
        return None


class TestStreamSlots:
    def test_streams_over_the_cap_are_refused_and_idle_ones_are_closed(self):
        """1,200 stream attempts against a cap of 1,000 (sync client) give exactly 200
        RESOURCE_EXHAUSTED; the 1,000 open streams that then send nothing are closed for idleness
        (DEADLINE_EXCEEDED, counted), and a new client gets a slot. The idle timeout leaves room
        for opening 1,200 streams on a loaded machine (with 3 s, streams opened first were closed
        before the last were opened, freeing slots: 1,033 open, 167 refused)."""
        with running_daemon(ENABLED, ["--max-streams", "1000", "--stream-idle-timeout", "15"]) as daemon:
            channels = [grpc.insecure_channel(daemon.grpc_target) for _ in range(12)]
            try:
                streams = [_HeldStream(channels[index % 12], index) for index in range(1200)]
                readers = [threading.Thread(target=s.first, daemon=True) for s in streams]
                for reader in readers:
                    reader.start()
                for reader in readers:
                    reader.join(timeout=60)
                outcomes = [s.outcome for s in streams]
                before = daemon.scrape()
                closed = [s.wait_closed() for s in streams if s.outcome == "open"]
                after = daemon.scrape()
                with Stream(channels[0]) as fresh:
                    verdict = fresh.one(call("after-idle", "read"))
            finally:
                for ch in channels:
                    ch.close()

        assert (1000, 200) == (outcomes.count("open"), outcomes.count(grpc.StatusCode.RESOURCE_EXHAUSTED))
        assert [grpc.StatusCode.DEADLINE_EXCEEDED] * 1000 == closed
        assert 1000 == delta(before, after, "loopwarden_idle_streams_closed_total") + value(
            before, "loopwarden_idle_streams_closed_total")
        assert pb.ACTION_ALLOW == verdict.action


def _without_read_override() -> list[str]:
    """As root, no file mode keeps a file from its owner: drop the capabilities that override
    permissions (the daemon then reads as an ordinary owner would). Not needed for other users."""
    if os.geteuid() != 0:
        return []
    caps = "-dac_override,-dac_read_search"
    return ["setpriv", f"--bounding-set={caps}", f"--inh-caps={caps}"]


class TestConfigReadability:
    def test_a_config_changed_while_unreadable_is_reloaded_once_readable(self):
        """The file is changed and made unreadable; the reload fails (counted once). It is made
        readable again with no other change to it, and the next poll reloads it."""
        with running_daemon(ENABLED, wrapper=_without_read_override()) as daemon:
            path = daemon.config_path
            tight = "{tools: {loopDetection: {enabled: true, warningThreshold: 2, criticalThreshold: 3}}}"
            tmp = path.with_suffix(".tmp")
            tmp.write_text(tight)
            tmp.chmod(0)
            os.replace(tmp, path)
            daemon.wait_for_log(lambda line: line.get("msg", "").startswith("config reload refused")
                                and "cannot read" in line.get("error", ""))
            failures = value(daemon.scrape(), "loopwarden_config_reloads_total", result="failure")
            path.chmod(0o644)  # changes neither inode, mtime nor size
            daemon.wait_for_log(lambda line: line.get("msg") == "config reloaded")
            with channel(daemon.grpc_target) as ch, Stream(ch) as stream:
                for index in range(3):
                    stream.send(call("reloaded", "read", seq=2 * index + 1),
                                outcome("reloaded", "read", result_json=SAME, seq=2 * index + 2))
                blocked = stream.one(call("reloaded", "read", seq=7))

        assert 1 == failures
        assert (pb.ACTION_BLOCK, 3) == (blocked.action, blocked.count)


def test_idle_timer_spares_a_stream_that_keeps_talking():
    """A stream that sends every second lives past a 2 s idle timeout."""
    with running_daemon(ENABLED, ["--stream-idle-timeout", "2"]) as daemon:
        with channel(daemon.grpc_target) as ch, Stream(ch) as stream:
            verdicts = []
            for index in range(5):
                verdicts.append(stream.one(call("chatty", "read", seq=index + 1)).action)
                time.sleep(1.0)

    assert [pb.ACTION_ALLOW] * 5 == verdicts
