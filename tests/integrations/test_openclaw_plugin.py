"""The OpenClaw plugin's own test run (integrations/openclaw): its hook handlers driven with
OpenClaw-shaped payloads against real daemons the Node tests start, the plugin loaded by OpenClaw's
own plugin loader, the fail-open/fail-closed paths with no daemon, a tsc --strict type check
against openclaw's published plugin types, the README's install run by OpenClaw's own `plugins
install`/`enable`/`list` on a fresh copy of the files, `openclaw agent --local` with a scripted
model whose 11th identical tool result carries the warning, and an ASK answered through
OpenClaw's own approval flow, sub-agent sessions as child runs and new OpenClaw runs as user turns;
scripts/install.sh writing the daemon's address as the plugin's target; and an ASK through a real
`openclaw gateway`, listed and answered with `openclaw approvals`; `llm_output`'s usage spending
a tokensPerTree budget through `openclaw agent --local`; and every scenario of the guard-policy
table (tests/conformance/guard), its outputs included, through the plugin's hooks.
All of it under Node 24 from the npm `node` package (OpenClaw needs Node >= 24.16), installed with
openclaw by integrations/openclaw/scripts/setup.sh.

A missing tool (bash, npm) or a failed set-up fails these tests: an integration check that skips
checks nothing.
"""
from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path

import pytest

from tests.conformance.guard_policy import output_scenario_names, scenario_names

REPO = Path(__file__).resolve().parents[2]
PLUGIN = REPO / "integrations" / "openclaw"
SETUP = PLUGIN / "scripts" / "setup.sh"
SETUP_TIMEOUT_SECONDS = 900
TEST_TIMEOUT_SECONDS = 900


@dataclass(frozen=True)
class Completed:
    returncode: int
    stdout: str
    stderr: str
    seconds: float

    def tail(self, lines: int = 80) -> str:
        return "\n".join((self.stdout + self.stderr).splitlines()[-lines:])


def tool(name: str) -> str:
    """Path of a tool on PATH; fails the test when it is missing."""
    found = shutil.which(name)
    if found is None:
        pytest.fail(f"{name} is not installed; the OpenClaw plugin tests need bash and npm", pytrace=False)
    return found


def run(args: list[str], cwd: Path, timeout: float, env: dict[str, str] | None = None) -> Completed:
    started = time.monotonic()
    proc = subprocess.run(args, cwd=cwd, env=env, stdin=subprocess.DEVNULL, capture_output=True,
                          text=True, timeout=timeout)
    return Completed(proc.returncode, proc.stdout, proc.stderr, time.monotonic() - started)


@pytest.fixture(scope="module")
def node24() -> str:
    """The set-up script's Node 24 binary, after it installed node, the client's and the plugin's deps."""
    tool("npm")
    result = run([tool("bash"), str(SETUP)], REPO, SETUP_TIMEOUT_SECONDS)
    if result.returncode != 0:
        pytest.fail(f"{SETUP.relative_to(REPO)} failed ({result.returncode}):\n{result.tail()}", pytrace=False)
    binary = result.stdout.strip().splitlines()[-1] if result.stdout.strip() else ""
    if not binary or not os.access(binary, os.X_OK):
        pytest.fail(f"set-up printed no Node 24 binary:\n{result.tail()}", pytrace=False)
    print(f"setup.sh: {result.seconds:.1f}s")
    return binary


@pytest.fixture(scope="module")
def node_run(node24: str) -> Completed:
    """One `node --test` run (TAP) of integrations/openclaw/test, shared by the assertions below."""
    env = dict(os.environ)
    # The Node tests start their daemons with this interpreter's loopwarden.
    env["LOOPWARDEN_SERVE_CMD"] = json.dumps([sys.executable, "-m", "loopwarden"])
    files = sorted(str(p.relative_to(PLUGIN)) for p in (PLUGIN / "test").glob("*.test.js"))
    result = run([node24, "--test", "--test-reporter=tap", *files], PLUGIN, TEST_TIMEOUT_SECONDS, env)
    print(f"node --test: {result.seconds:.1f}s")
    return result


def passed_tests(result: Completed) -> set[str]:
    return set(re.findall(r"^\s*ok \d+ - (.+?)(?: # .*)?$", result.stdout, re.M))


def test_setup_installs_node_24(node24: str):
    """The set-up script's node is a Node 24 that satisfies openclaw's engines (>= 24.16)."""
    version = subprocess.run([node24, "--version"], capture_output=True, text=True, check=True).stdout.strip()
    major, minor = (int(part) for part in version.lstrip("v").split(".")[:2])
    assert (24, True) == (major, minor >= 16), version


def test_plugin_test_run_passes(node_run: Completed):
    """`node --test` exits 0 and its summary counts passing tests and no failures or skips."""
    assert node_run.returncode == 0, node_run.tail()
    counts = {key: re.search(rf"^# {key} (\d+)$", node_run.stdout, re.M) for key in ("pass", "fail", "skipped")}
    assert all(counts.values()), node_run.tail()
    summary = {key: int(match.group(1)) for key, match in counts.items() if match}
    assert (0, 0, True) == (summary["fail"], summary["skipped"], summary["pass"] > 0), node_run.tail()


@pytest.mark.parametrize("name", [
    "21 identical calls with identical results: calls 1-20 run, the 21st is blocked with the block message",
    "21 identical calls: OpenClaw runs 20, and hands the model its blocked result with the block message for the 21st",
    "no daemon listening: every hook fails open, quietly after the first log line",
    "no daemon listening, failOpen false: the call is blocked with a reason",
    "fails open by default: OpenClaw runs every tool, and the plugin logs the outage once",
    "OpenClaw loads the plugin and registers its five hooks and its tool-result middleware",
    "the plugin type-checks under tsc --strict against openclaw's plugin-sdk types",
    "plugins install --link --force succeeds on a fresh checkout, and the plugin is listed installed and enabled",
    "without --accept-capabilities and no terminal to ask on, the install stops and names the flag",
    "the 11th identical tool result the model receives carries the warning text",
    # ASK, sub-agents and user turns through OpenClaw's own loader and approval flow.
    "allow-always: OpenClaw asks, the call runs, and the answer is an exemption `loopwarden exemptions list` shows",
    "allow-once runs the call and the next critical asks again; deny blocks it, and the loop's later calls are blocked without asking",
    "nobody answers: OpenClaw denies the call when approvalTimeoutMs runs out, with the loop's reason, and the daemon takes it as a denial",
    "a stuck sub-agent is blocked without its siblings being warned, and its parent's next call carries the child_stopped warning",
    "a new OpenClaw run in the session is a user turn: the call blocked in the last run runs again",
    "the second message is a user turn: the call blocked in the first message's run runs again",
    # The install writes the target of the daemon the user runs.
    "GRPC_PORT (make serve's port): install.sh checks the daemon there, writes its address with openclaw config set, and says why",
    "--target wins over LOOPWARDEN_LISTEN, which wins over GRPC_PORT; a wildcard listen host is dialled on 127.0.0.1",
    "no daemon at the address: install.sh stops before touching OpenClaw and names the address; --no-check writes it anyway",
    # ASK and `openclaw approvals`, through a real gateway.
    "`openclaw agent` through the gateway: OpenClaw refuses the approval before the gateway, so `openclaw approvals pending` has nothing, and the daemon takes it as a denial",
    "a run from a gateway client that shows approvals (OpenClaw's TUI client): `openclaw approvals pending` lists the ASK, `openclaw approvals resolve … allow-always` runs the call and makes the exemption",
    "an approval OpenClaw could show nobody (cancelled) is a denial, and the log says why nothing could answer it",
    # llm_output: a run's answer and usage, with OpenClaw's conversation-access grant.
    "with conversation access, the run that spent tokensPerTree leaves the next run's first tool call stopped by budget_exhausted",
    "without conversation access no token is counted: the next run's tool calls run",
])
def test_acceptance_test_passed(node_run: Completed, name: str):
    """Each acceptance check of the plugin is a passing Node test."""
    assert name in passed_tests(node_run), node_run.tail()


@pytest.mark.parametrize("name", scenario_names())
def test_guard_policy_scenario_passed(node_run: Completed, name: str):
    """Each scenario of the guard-policy table (tests/conformance/guard) is a passing test of the
    plugin's hooks."""
    assert f"guard policy: {name}" in passed_tests(node_run), node_run.tail()


@pytest.mark.parametrize("name", output_scenario_names())
def test_guard_policy_output_scenario_passed(node_run: Completed, name: str):
    """Each output scenario of the guard-policy table is a passing test of the plugin's llm_output."""
    assert f"guard policy output: {name}" in passed_tests(node_run), node_run.tail()
