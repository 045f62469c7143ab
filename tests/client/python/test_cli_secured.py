"""Every client command against a daemon secured as the README recommends (TLS and bearer tokens,
two tenants): it works with the connection flags or their LOOPWARDEN_* variables, and without
them it refuses with a message that says what is missing."""
from __future__ import annotations

import json
import pathlib

import pytest

from loopwarden import LoopwardenClient
from tests.support.cli import loopwarden

RESULT = '{"content": [{"type": "text", "text": "same"}], "details": {}}'


@pytest.fixture(scope="module")
def secrets(tmp_path_factory) -> pathlib.Path:
    """The daemon's token file (tenants alpha and beta) and each tenant's own token file."""
    directory = tmp_path_factory.mktemp("tokens")
    (directory / "daemon-tokens").write_text("alpha tok-alpha-0123456789\nbeta tok-beta-0123456789\n")
    (directory / "alpha").write_text("tok-alpha-0123456789\n")
    (directory / "beta").write_text("tok-beta-0123456789\n")
    (directory / "wrong").write_text("tok-nobody\n")
    return directory


@pytest.fixture(scope="module")
def daemon_args(certs, secrets) -> tuple[str, ...]:
    return ("--tls-cert", str(certs / "server.pem"), "--tls-key", str(certs / "server.key"),
            "--auth-token-file", str(secrets / "daemon-tokens"))


@pytest.fixture(scope="module")
def manifest(tmp_path_factory) -> pathlib.Path:
    """A labelled set of two runs: one good, one that repeats a read 22 times."""
    directory = tmp_path_factory.mktemp("labelled")
    events = [{"run_id": "secured/good", "seq": 1, "kind": "tool_call", "tool_name": "read", "params": {"path": "/a"}},
              {"run_id": "secured/good", "seq": 2, "kind": "run_end"}]
    for n in range(22):
        events += [{"run_id": "secured/loop", "seq": 2 * n + 1, "kind": "tool_call", "tool_name": "read",
                    "params": {"path": "/x"}},
                   {"run_id": "secured/loop", "seq": 2 * n + 2, "kind": "tool_outcome", "tool_name": "read",
                    "params": {"path": "/x"}, "result_json": RESULT}]
    (directory / "trace.jsonl").write_text("".join(json.dumps(event) + "\n" for event in events))
    (directory / "manifest.json").write_text(json.dumps({
        "format": "loopwarden-labelled-set/1", "traces": [{"path": "trace.jsonl"}],
        "runs": [{"run_id": "secured/good", "label": "good"},
                 {"run_id": "secured/loop", "label": "looping", "kind": "generic_repeat", "loop_start_seq": 1}]}))
    return directory / "manifest.json"


@pytest.fixture(scope="module")
def trace(tmp_path_factory) -> pathlib.Path:
    path = tmp_path_factory.mktemp("trace") / "one.jsonl"
    path.write_text(json.dumps({"run_id": "secured/replayed", "seq": 1, "kind": "tool_call", "tool_name": "read"}) + "\n")
    return path


def alpha_client(daemon, certs) -> LoopwardenClient:
    return LoopwardenClient(daemon.grpc_target, root_certificates=(certs / "ca.pem").read_bytes(),
                            token="tok-alpha-0123456789")


# Each client command that needs the token, as (name, arguments before the connection flags, what success prints).
COMMANDS = {
    "check": (lambda ctx: ["check", "--run", "secured/check", "--tool", "read"], "ALLOW"),
    "inspect": (lambda ctx: ["inspect", "secured/seen"], "run       secured/seen"),
    "replay": (lambda ctx: ["replay", str(ctx["trace"])], "summary: allow=1"),
    "evaluate": (lambda ctx: ["evaluate", str(ctx["manifest"])], "result: PASS"),
}


@pytest.fixture(scope="module")
def context(daemon, certs, trace, manifest):
    with alpha_client(daemon, certs) as client:
        client.tool_call("secured/seen", "read", {"path": "/x"})
    return {"trace": trace, "manifest": manifest}


def flags(daemon, certs, secrets, *, tls: bool = True, token: str | None = "alpha") -> list[str]:
    chosen = ["--address", daemon.grpc_target]
    if tls:
        chosen += ["--tls-ca", str(certs / "ca.pem")]
    if token:
        chosen += ["--token-file", str(secrets / token)]
    return chosen


class TestWithCredentials:
    @pytest.mark.parametrize("command", COMMANDS)
    def test_works_with_flags(self, command, daemon, certs, secrets, context):
        """With --address, --tls-ca and --token-file every command does its job and exits 0."""
        arguments, expected = COMMANDS[command]

        result = loopwarden(*arguments(context), *flags(daemon, certs, secrets), timeout=120)

        assert 0 == result.returncode, result.stderr
        assert expected in result.stdout

    @pytest.mark.parametrize("command", COMMANDS)
    def test_works_with_environment_variables(self, command, daemon, certs, secrets, context):
        """LOOPWARDEN_ADDRESS, LOOPWARDEN_TLS_CA and LOOPWARDEN_TOKEN_FILE stand in for the flags."""
        arguments, expected = COMMANDS[command]

        result = loopwarden(*arguments(context), timeout=120, env={
            "LOOPWARDEN_ADDRESS": daemon.grpc_target, "LOOPWARDEN_TLS_CA": str(certs / "ca.pem"),
            "LOOPWARDEN_TOKEN_FILE": str(secrets / "alpha")})

        assert 0 == result.returncode, result.stderr
        assert expected in result.stdout

    def test_health_needs_tls_but_no_token(self, daemon, certs):
        """Health stays open on a token-guarded daemon: --tls-ca alone is enough."""
        result = loopwarden("health", "--address", daemon.grpc_target, "--tls-ca", str(certs / "ca.pem"))

        assert (0, f"{daemon.grpc_target} (server): SERVING") == (result.returncode, result.stdout.strip())


class TestWithoutCredentials:
    @pytest.mark.parametrize("command", COMMANDS)
    def test_without_token_says_a_token_is_needed(self, command, daemon, certs, secrets, context):
        """Without --token-file: exit 2, UNAUTHENTICATED named, and a hint naming the flag and its variable."""
        arguments, _ = COMMANDS[command]

        result = loopwarden(*arguments(context), *flags(daemon, certs, secrets, token=None), timeout=120)

        assert 2 == result.returncode
        assert f"{daemon.grpc_target}: " in result.stderr
        assert "UNAUTHENTICATED: missing bearer token" in result.stderr
        assert ("hint: the daemon requires a bearer token: pass --token-file FILE (or set LOOPWARDEN_TOKEN_FILE)"
                in result.stderr.splitlines())

    @pytest.mark.parametrize("command", COMMANDS)
    def test_without_tls_says_to_pass_the_ca(self, command, daemon, certs, secrets, context):
        """Plaintext to a TLS port: exit 2, UNAVAILABLE, and a hint to pass --tls-ca."""
        arguments, _ = COMMANDS[command]

        result = loopwarden(*arguments(context), *flags(daemon, certs, secrets, tls=False), timeout=120)

        assert 2 == result.returncode
        assert "UNAVAILABLE" in result.stderr
        assert "If it serves TLS, pass --tls-ca CA.pem (or set LOOPWARDEN_TLS_CA)" in result.stderr

    def test_health_without_tls_says_to_pass_the_ca(self, daemon):
        result = loopwarden("health", "--address", daemon.grpc_target, "--timeout", "5")

        assert 1 == result.returncode
        assert "If it serves TLS, pass --tls-ca CA.pem" in result.stderr

    def test_wrong_token_is_refused(self, daemon, certs, secrets):
        """A token the daemon does not hold: UNAUTHENTICATED invalid bearer token, and a hint about the file."""
        result = loopwarden("check", "--run", "r", "--tool", "read", *flags(daemon, certs, secrets, token="wrong"))

        assert 2 == result.returncode
        assert "UNAUTHENTICATED: invalid bearer token" in result.stderr
        assert "hint: the daemon did not accept the token of --token-file" in result.stderr

    def test_wrong_ca_fails_the_handshake(self, daemon, certs, secrets):
        """A CA that did not sign the daemon's certificate: exit 2 and a hint about the TLS handshake."""
        result = loopwarden("check", "--run", "r", "--tool", "read", "--address", daemon.grpc_target,
                            "--tls-ca", str(certs / "rogue-ca.pem"), "--token-file", str(secrets / "alpha"))

        assert 2 == result.returncode
        assert "UNAVAILABLE" in result.stderr
        assert "--tls-ca" in result.stderr.splitlines()[-1]


class TestTenants:
    def test_twenty_first_identical_call_is_blocked_for_the_same_tenant(self, daemon, certs, secrets, run_id):
        """Twenty identical calls and outcomes sent by the library client of tenant alpha; `loopwarden check`
        with alpha's token prints BLOCK for the 21st, and with beta's token (another tenant, another run) ALLOW."""
        with alpha_client(daemon, certs) as client:
            for _ in range(20):
                client.tool_call(run_id, "read", {"path": "/x"})
                client.tool_outcome(run_id, "read", {"path": "/x"}, result_json=RESULT)
        arguments = ["check", "--run", run_id, "--tool", "read", "--params", '{"path": "/x"}']

        alpha = loopwarden(*arguments, *flags(daemon, certs, secrets, token="alpha"))
        beta = loopwarden(*arguments, *flags(daemon, certs, secrets, token="beta"))

        assert 1 == alpha.returncode, alpha.stderr
        assert alpha.stdout.startswith("BLOCK generic_repeat count=20 decision=")
        assert (0, "ALLOW") == (beta.returncode, beta.stdout.strip()), beta.stderr
