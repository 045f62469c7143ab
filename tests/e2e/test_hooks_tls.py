"""The hook listener's TLS on aiohttp: client certificates (mTLS) are required
when --tls-client-ca is set, and renewed certificate files apply to new handshakes without a
restart, as on the gRPC port."""
from __future__ import annotations

import ssl
import time
import urllib.error

import pytest

from tests.client.python.hooks import payloads
from tests.e2e.test_hooks_http import hooks_address, post
from tests.support.daemon import running_daemon

pytestmark = pytest.mark.daemon

CONFIG = "{tools: {loopDetection: {enabled: true}}}"


def _context(ca, client=None) -> ssl.SSLContext:
    context = ssl.create_default_context(cafile=str(ca))
    if client is not None:
        context.load_cert_chain(str(client[0]), str(client[1]))
    return context


def test_mtls_requires_a_client_certificate_from_the_ca(certs, run_id):
    args = ["--hooks-listen", "127.0.0.1:0", "--tls-cert", str(certs / "server.pem"),
            "--tls-key", str(certs / "server.key"), "--tls-client-ca", str(certs / "ca.pem")]
    with running_daemon(CONFIG, args) as daemon:
        address = hooks_address(daemon)
        body = payloads.claude_pre_tool_use(run_id, "t")
        served = post(address, "/v1/hooks/claude-code", body, scheme="https",
                      context=_context(certs / "ca.pem", (certs / "client.pem", certs / "client.key")))
        for client in (None, (certs / "rogue-client.pem", certs / "rogue-client.key")):
            with pytest.raises((urllib.error.URLError, ssl.SSLError, ConnectionError)):
                post(address, "/v1/hooks/claude-code", body, scheme="https", context=_context(certs / "ca.pem", client))

    assert (200, {}) == served


def test_renewed_certificates_apply_to_new_handshakes(certs, tmp_path, run_id):
    from tests.e2e.test_security import _replace
    from tests.support.certs import served_and_renewed

    cert, key, renewed = served_and_renewed(certs, tmp_path)
    args = ["--hooks-listen", "127.0.0.1:0", "--tls-cert", str(cert), "--tls-key", str(key)]
    with running_daemon(CONFIG, args) as daemon:
        address = hooks_address(daemon)

        def send(ca, index: int) -> tuple[int, dict]:
            return post(address, "/v1/hooks/claude-code", payloads.claude_pre_tool_use(run_id, f"t{index}", f"ls {index}"),
                        scheme="https", context=_context(ca))

        before = send(certs / "ca.pem", 0)
        _replace(key, (renewed / "server2.key").read_bytes())
        _replace(cert, (renewed / "server2.pem").read_bytes())
        deadline = time.monotonic() + 10
        while True:
            try:
                after = send(renewed / "ca2.pem", 1)
                break
            except (urllib.error.URLError, ssl.SSLError, ConnectionError):
                assert time.monotonic() < deadline, "the renewed certificate was never served"
                time.sleep(0.3)
        with pytest.raises((urllib.error.URLError, ssl.SSLError, ConnectionError)):
            send(certs / "ca.pem", 2)

    assert (200, {}) == before == after
