"""Hypothesis profiles: CI runs a fixed, derandomized set so a landing never depends on luck;
locally the examples vary run to run. LOOPWARDEN_HYPOTHESIS_PROFILE=long digs deeper."""
from __future__ import annotations

import os

from hypothesis import settings

settings.register_profile("ci", derandomize=True, deadline=None, print_blob=True)
settings.register_profile("dev", deadline=None)
settings.register_profile("long", deadline=None, max_examples=2000)
settings.load_profile(os.environ.get("LOOPWARDEN_HYPOTHESIS_PROFILE") or ("ci" if os.environ.get("CI") else "dev"))


# ---------------------------------------------------------------------------------------------
# Shared fixtures. A module picks its daemon's config and flags by overriding `daemon_config`
# and `daemon_args`; every module gets its own daemon (module scope), so tests of one module
# share it and `run_id` keeps their histories apart.

import pytest  # noqa: E402

pytest_plugins = ["tests.support.certs"]

ENABLED_CONFIG = "{tools: {loopDetection: {enabled: true}}}"


@pytest.fixture(scope="module")
def daemon_config() -> str | None:
    """The daemon's config file text (None: the embedded default config)."""
    return ENABLED_CONFIG


@pytest.fixture(scope="module")
def daemon_args() -> tuple[str, ...]:
    """Extra `serve` flags."""
    return ()


@pytest.fixture(scope="module")
def daemon(daemon_config, daemon_args):
    from tests.support.daemon import running_daemon

    with running_daemon(daemon_config, daemon_args) as handle:
        yield handle


@pytest.fixture
def client(daemon):
    from loopwarden import LoopwardenClient

    with LoopwardenClient(daemon.grpc_target) as blocking_client:
        yield blocking_client


def pytest_collection_modifyitems(items) -> None:
    """A test that takes the `daemon` fixture (or `client`, built on it) talks to a daemon process:
    it belongs to `make test` only (marker `daemon`, pytest.ini)."""
    for item in items:
        if "daemon" in getattr(item, "fixturenames", ()):
            item.add_marker(pytest.mark.daemon)


@pytest.hookimpl(tryfirst=True)
def pytest_runtest_setup(item) -> None:
    """In a run that deselects `daemon` (make test-fast), tells tests/support/daemon.py whether
    this test may start a daemon process (before its fixtures start one): one that does without
    the marker fails at once instead of slowing the fast tier down unnoticed. Runs that keep the
    marker's tests (make test) start daemons freely."""
    from tests.support import daemon as daemon_support

    fast_tier = "not daemon" in (item.config.option.markexpr or "")
    daemon_support.starts_allowed = not fast_tier or item.get_closest_marker("daemon") is not None


@pytest.fixture
def run_id(request) -> str:
    """A run id of its own for every test, so tests sharing a daemon never share history."""
    return f"{request.module.__name__.rsplit('.', 1)[-1]}/{request.node.name}"


# ---------------------------------------------------------------------------------------------
# Time per test group (tests/<group>, tests/client/<language>), printed at the end of every run:
# CI's log says where the minutes went.

_GROUP_SECONDS: dict[str, float] = {}
_GROUP_TESTS: dict[str, int] = {}


def _group_of(nodeid: str) -> str:
    """tests/daemon/test_x.py::t -> tests/daemon; tests/client/node/test_y.py -> tests/client/node;
    tests/test_layering.py -> tests."""
    directories = nodeid.split("::", 1)[0].split("/")[:-1]
    depth = 3 if directories[1:2] == ["client"] else 2
    return "/".join(directories[:depth])


def pytest_runtest_logreport(report) -> None:
    group = _group_of(report.nodeid)
    _GROUP_SECONDS[group] = _GROUP_SECONDS.get(group, 0.0) + report.duration
    if report.when == "call":
        _GROUP_TESTS[group] = _GROUP_TESTS.get(group, 0) + 1


def pytest_terminal_summary(terminalreporter) -> None:
    if not _GROUP_SECONDS:
        return
    terminalreporter.section("time per test group")
    for group, seconds in sorted(_GROUP_SECONDS.items(), key=lambda item: -item[1]):
        terminalreporter.write_line(f"{group:<28} {_GROUP_TESTS.get(group, 0):>5} tests {seconds:>8.1f} s")


def pytest_report_header(config) -> str:
    """The differential suite's seed for this run, so any failure can be replayed exactly."""
    from tests.core.test_differential import SEED

    return f"differential seed: {SEED} (replay: LOOPWARDEN_DIFFERENTIAL_SEED={SEED})"
