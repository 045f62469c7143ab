"""The Go client's own test run (go test): the conformance scenarios over real Evaluate streams
against daemons it starts, the Guard against a real daemon and against the guard-policy table;
plus vet and the stubs' freshness."""
from __future__ import annotations

import re

import pytest

from tests.conformance.guard_policy import scenario_names
from tests.conformance.scenarios import load_variants
from tests.support.polyglot import GO_CLIENT, REPO, run, runner_env, tool


@pytest.fixture(scope="module")
def go_run():
    """One `go vet` + `go test -v` run shared by the assertions below."""
    go = tool("go")
    vet = run([go, "vet", "./..."], GO_CLIENT)
    assert 0 == vet.returncode, vet.tail()
    # -count=1: the daemon and the scenario data are outside what go test's cache keys on.
    result = run([go, "test", "-count=1", "-v", "./..."], GO_CLIENT)
    print(f"go vet: {vet.seconds:.1f}s, go test: {result.seconds:.1f}s")
    return result


def test_go_test_run_passes(go_run):
    """`go test ./...` exits 0, reports its package ok and no failing test."""
    assert go_run.returncode == 0, go_run.tail()
    assert re.search(r"^ok\s+github.com/loopwarden/loopwarden/client/go/loopwarden\s", go_run.output, re.M), go_run.tail()
    assert [] == re.findall(r"--- FAIL: .*", go_run.output)


def test_every_scenario_variant_passed_in_go(go_run):
    """Each variant of the shared data is a passing Go subtest over an Evaluate stream."""
    passed = set(re.findall(r"--- PASS: TestConformanceOverEvaluateStream/(\S+)", go_run.output))
    missing = [v.id for v in load_variants() if v.id not in passed]
    assert [] == missing, go_run.tail()


def test_every_guard_policy_scenario_passed_in_go(go_run):
    """Each scenario of the guard-policy table (tests/conformance/guard) is a passing Guard subtest."""
    passed = set(re.findall(r"--- PASS: TestGuardPolicy/(\S+)", go_run.output))
    assert [] == [name for name in scenario_names() if name not in passed], go_run.tail()


def test_go_stubs_are_fresh(tmp_path):
    """Regenerating the Go stubs from proto/ with the pinned plugins changes nothing."""
    tool("go")
    result = run(["bash", str(REPO / "scripts" / "gen_go_stubs.sh"), str(tmp_path)], REPO,
                 env={**runner_env(), "BUF": tool("buf")})
    assert 0 == result.returncode, result.tail()
    committed = sorted(p.name for p in (GO_CLIENT / "loopwardenv1").glob("*.go"))
    generated = sorted(p.name for p in (tmp_path / "loopwardenv1").glob("*.go"))
    assert committed == generated
    stale = [name for name in committed
             if (GO_CLIENT / "loopwardenv1" / name).read_bytes() != (tmp_path / "loopwardenv1" / name).read_bytes()]
    assert [] == stale, "run scripts/gen_go_stubs.sh and commit client/go/loopwardenv1"
