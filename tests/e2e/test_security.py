"""TLS, mTLS and bearer-token auth against the real daemon with real certificates."""
from __future__ import annotations

import grpc
import pytest
from grpc_health.v1 import health_pb2, health_pb2_grpc
from grpc_reflection.v1alpha import reflection_pb2, reflection_pb2_grpc
from loopwarden.v1 import loopwarden_pb2 as pb
from loopwarden.v1 import loopwarden_pb2_grpc as pb_grpc

from loopwarden import LoopwardenClient, LoopwardenUnavailable
from tests.support.daemon import running_daemon
from tests.support.grpc_helpers import call, health_status
from tests.support.metrics import value

pytestmark = pytest.mark.daemon

TOKEN = "s3cret-token-for-tests"


def _check(ch: grpc.Channel, metadata=()) -> pb.Verdict:
    stub = pb_grpc.LoopDetectionServiceStub(ch)
    return stub.Check(pb.CheckRequest(event=call("sec-1", "read")), timeout=5, metadata=metadata).verdict


def _code(fn) -> grpc.StatusCode:
    with pytest.raises(grpc.RpcError) as failure:
        fn()
    return failure.value.code()


def _tls_channel(daemon, certs, client: str | None = None) -> grpc.Channel:
    key = (certs / f"{client}.key").read_bytes() if client else None
    chain = (certs / f"{client}.pem").read_bytes() if client else None
    credentials = grpc.ssl_channel_credentials((certs / "ca.pem").read_bytes(), key, chain)
    return grpc.secure_channel(daemon.grpc_target, credentials)


class TestTls:
    def test_tls_serves_trusting_clients_and_refuses_plaintext(self, certs):
        """A client trusting the CA is served; a plaintext client is UNAVAILABLE; probes use the health port."""
        args = ["--tls-cert", str(certs / "server.pem"), "--tls-key", str(certs / "server.key"),
                "--health-listen", "127.0.0.1:0"]
        with running_daemon(extra_args=args) as daemon:
            with _tls_channel(daemon, certs) as ch:
                assert pb.ACTION_ALLOW == _check(ch).action
            with grpc.insecure_channel(daemon.grpc_target) as ch:
                assert grpc.StatusCode.UNAVAILABLE == _code(lambda: _check(ch))
            health_target = next(line for line in daemon.logs() if line.get("msg") == "listening")["health_address"]
            assert "SERVING" == health_status(health_target)
            client = LoopwardenClient(daemon.grpc_target, root_certificates=(certs / "ca.pem").read_bytes())
            with client:
                assert client.tool_call("sec-2", "read").may_run


@pytest.fixture(scope="module")
def mtls_daemon(certs):
    args = ["--tls-cert", str(certs / "server.pem"), "--tls-key", str(certs / "server.key"),
            "--tls-client-ca", str(certs / "ca.pem")]
    with running_daemon(extra_args=args) as handle:
        yield handle


@pytest.fixture(scope="module")
def token_daemon(tmp_path_factory):
    token_file = tmp_path_factory.mktemp("token") / "token"
    token_file.write_text(TOKEN + "\n")
    with running_daemon(extra_args=["--auth-token-file", str(token_file)]) as handle:
        yield handle


class TestMutualTls:
    def test_a_client_certificate_from_the_ca_is_served(self, mtls_daemon, certs):
        """mTLS with a certificate the configured CA signed works."""
        daemon = mtls_daemon
        with _tls_channel(daemon, certs, "client") as ch:
            assert pb.ACTION_ALLOW == _check(ch).action

    @pytest.mark.parametrize("client", [None, "rogue-client"], ids=["no-cert", "unknown-ca"])
    def test_clients_without_a_trusted_certificate_are_refused(self, mtls_daemon, certs, client):
        """No client certificate, or one from another CA, fails the handshake: UNAVAILABLE."""
        daemon = mtls_daemon
        with _tls_channel(daemon, certs, client) as ch:
            assert grpc.StatusCode.UNAVAILABLE == _code(lambda: _check(ch))


class TestBearerToken:
    @pytest.mark.parametrize("metadata", [(), (("authorization", "Bearer wrong"),),
                                          (("authorization", TOKEN),)], ids=["none", "wrong", "no-scheme"])
    def test_every_rpc_needs_the_token(self, token_daemon, metadata):
        """Evaluate, Check, InspectRun and reflection are UNAUTHENTICATED without the right token."""
        daemon = token_daemon
        with grpc.insecure_channel(daemon.grpc_target) as ch:
            stub = pb_grpc.LoopDetectionServiceStub(ch)
            reflection = reflection_pb2_grpc.ServerReflectionStub(ch)
            codes = [
                _code(lambda: _check(ch, metadata)),
                _code(lambda: list(stub.Evaluate(iter([pb.EvaluateRequest(events=[call("sec-3", "read")])]),
                                                 timeout=5, metadata=metadata))),
                _code(lambda: stub.InspectRun(pb.InspectRunRequest(run_id="sec-3"), timeout=5, metadata=metadata)),
                _code(lambda: list(reflection.ServerReflectionInfo(
                    iter([reflection_pb2.ServerReflectionRequest(list_services="")]), timeout=5, metadata=metadata))),
            ]
        assert [grpc.StatusCode.UNAUTHENTICATED] * 4 == codes

    def test_the_right_token_is_served_and_health_stays_open(self, token_daemon):
        """With the token every RPC works; health answers without one."""
        daemon = token_daemon
        with grpc.insecure_channel(daemon.grpc_target) as ch:
            assert pb.ACTION_ALLOW == _check(ch, (("authorization", f"Bearer {TOKEN}"),)).action
            response = health_pb2_grpc.HealthStub(ch).Check(health_pb2.HealthCheckRequest(), timeout=5)
        assert health_pb2.HealthCheckResponse.SERVING == response.status
        with LoopwardenClient(daemon.grpc_target, token=TOKEN) as client:
            assert client.tool_call("sec-4", "read").may_run
            assert 1 == len(client.inspect("sec-4").records)
        with LoopwardenClient(daemon.grpc_target, token="nope") as client, pytest.raises(LoopwardenUnavailable):
            client.tool_call("sec-5", "read")


def _replace(path, content: bytes) -> None:
    """Swap a file the way a Secret update or cert-manager renewal does: write aside, rename over."""
    tmp = path.with_suffix(".swap")
    tmp.write_bytes(content)
    tmp.replace(path)


class TestRotation:
    def test_renewed_certificates_apply_to_new_connections(self, certs, tmp_path):
        """Replacing cert and key files (another CA) is picked up without a restart; the old chain stops working."""
        import time

        from tests.support.certs import served_and_renewed

        cert, key, renewed = served_and_renewed(certs, tmp_path)
        with running_daemon(extra_args=["--tls-cert", str(cert), "--tls-key", str(key)]) as daemon:
            def check_with(ca: bytes) -> pb.Verdict:
                with grpc.secure_channel(daemon.grpc_target, grpc.ssl_channel_credentials(ca)) as ch:
                    return _check(ch)

            assert pb.ACTION_ALLOW == check_with((certs / "ca.pem").read_bytes()).action
            _replace(key, (renewed / "server2.key").read_bytes())
            _replace(cert, (renewed / "server2.pem").read_bytes())
            deadline = time.monotonic() + 10
            while True:
                try:
                    verdict = check_with((renewed / "ca2.pem").read_bytes())
                    break
                except grpc.RpcError:
                    assert time.monotonic() < deadline, "the renewed certificate was never served"
                    time.sleep(0.3)
            assert pb.ACTION_ALLOW == verdict.action
            assert grpc.StatusCode.UNAVAILABLE == _code(lambda: check_with((certs / "ca.pem").read_bytes()))
            assert daemon.wait_for_log(lambda l: l.get("msg") == "TLS certificates reloaded")

    def test_a_rotated_token_replaces_the_old_one_and_a_bad_file_fails_closed(self, tmp_path):
        """The rotated token is accepted and the old one refused. An emptied or deleted token file
        refuses every authenticated RPC (logged, token_file_ok 0, health still open) until a valid
        file is back, without a restart."""
        token_file = tmp_path / "token"
        token_file.write_text("first-token\n")
        with running_daemon(extra_args=["--auth-token-file", str(token_file)]) as daemon:
            def code_with(token: str):
                with grpc.insecure_channel(daemon.grpc_target) as ch:
                    try:
                        _check(ch, (("authorization", f"Bearer {token}"),))
                        return grpc.StatusCode.OK
                    except grpc.RpcError as exc:
                        return exc.code()

            assert grpc.StatusCode.OK == code_with("first-token")
            _replace(token_file, b"second-token\n")
            _eventually(lambda: code_with("second-token") == grpc.StatusCode.OK, "the rotated token was never accepted")
            assert grpc.StatusCode.UNAUTHENTICATED == code_with("first-token")

            _replace(token_file, b"\n")
            _eventually(lambda: code_with("second-token") == grpc.StatusCode.UNAUTHENTICATED,
                        "an empty token file did not fail closed")
            assert 0 == value(daemon.scrape(), "loopwarden_token_file_ok")
            assert "SERVING" == health_status(daemon.grpc_target)
            assert daemon.wait_for_log(lambda l: "token file is unusable" in l.get("msg", ""))

            _replace(token_file, b"second-token\n")
            _eventually(lambda: code_with("second-token") == grpc.StatusCode.OK, "a restored file was not taken")
            token_file.unlink()
            _eventually(lambda: code_with("second-token") == grpc.StatusCode.UNAUTHENTICATED,
                        "a deleted token file did not fail closed")
            assert daemon.wait_for_log(lambda l: "token file cannot be read" in l.get("msg", ""))
            failures = value(daemon.scrape(), "loopwarden_auth_failures_total", reason="token_file_unusable")
            _replace(token_file, b"second-token\n")
            _eventually(lambda: code_with("second-token") == grpc.StatusCode.OK, "a restored file was not taken")
            assert 1 == value(daemon.scrape(), "loopwarden_token_file_ok")
            assert failures >= 2


def _eventually(condition, message: str, timeout: float = 10.0) -> None:
    """Poll `condition` (files are re-checked at most once a second) until it holds."""
    import time

    deadline = time.monotonic() + timeout
    while not condition():
        assert time.monotonic() < deadline, message
        time.sleep(0.2)
