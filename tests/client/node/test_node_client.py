"""The Node client's own test run (node --test): the conformance scenarios over real Evaluate
streams against daemons it starts, guardTool against a real daemon and against the guard-policy
table, and a tsc type check."""
from __future__ import annotations

import re

import pytest

from tests.conformance.guard_policy import scenario_names
from tests.conformance.scenarios import load_variants
from tests.support.polyglot import NODE_CLIENT, ensure_node_modules, run, tool

TEST_FILES = sorted(str(p.relative_to(NODE_CLIENT)) for p in (NODE_CLIENT / "test").glob("*.test.js"))


@pytest.fixture(scope="module")
def node_run():
    """One `node --test` run (TAP) shared by the assertions below."""
    ensure_node_modules()
    result = run([tool("node"), "--test", "--test-reporter=tap", *TEST_FILES], NODE_CLIENT)
    print(f"node --test: {result.seconds:.1f}s")
    return result


def test_node_test_run_passes(node_run):
    """`node --test` exits 0 and its summary counts passing tests and no failures."""
    assert node_run.returncode == 0, node_run.tail()
    passed = re.search(r"^# pass (\d+)$", node_run.output, re.M)
    failed = re.search(r"^# fail (\d+)$", node_run.output, re.M)
    assert passed and failed, node_run.tail()
    assert (0, True) == (int(failed.group(1)), int(passed.group(1)) > 0), node_run.tail()


def test_every_scenario_variant_passed_in_node(node_run):
    """Each variant of the shared data is a passing Node test over an Evaluate stream."""
    passed = set(re.findall(r"^\s*ok \d+ - (\S+)$", node_run.output, re.M))
    missing = [v.id for v in load_variants() if v.id not in passed]
    assert [] == missing, node_run.tail()


def test_every_guard_policy_scenario_passed_in_node(node_run):
    """Each scenario of the guard-policy table (tests/conformance/guard) is a passing guardTool test."""
    passed = set(re.findall(r"^\s*ok \d+ - guard policy: (\S+)$", node_run.output, re.M))
    assert [] == [name for name in scenario_names() if name not in passed], node_run.tail()


def test_node_client_type_checks():
    """The JSDoc types of the Node client, its example and its tests hold under `tsc --strict`."""
    ensure_node_modules()
    result = run([tool("node"), "node_modules/typescript/bin/tsc", "-p", "tsconfig.json"], NODE_CLIENT)
    assert 0 == result.returncode, result.tail()
