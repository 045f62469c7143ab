"""The chart's state values: more than one replica is refused without a shared store."""
from __future__ import annotations

import subprocess

import pytest

from tests.deploy.tooling import CHART, tool

IMAGE = ("--set", "image.repository=registry.example/loopwarden")


def _lint(*sets: str) -> subprocess.CompletedProcess:
    args = [tool("helm"), "lint", "--strict", str(CHART), *IMAGE]
    for item in sets:
        args += ["--set", item]
    return subprocess.run(args, capture_output=True, text=True, timeout=120)


class TestReplicasNeedASharedStore:
    @pytest.mark.parametrize("sets", [("replicaCount=3",), ("autoscaling.enabled=true",),
                                      ("replicaCount=3", "state.store=file")],
                             ids=["3 replicas", "autoscaling", "3 replicas on the file store"])
    def test_more_than_one_replica_without_a_shared_store_is_refused(self, sets):
        """helm lint --strict fails on the values schema, naming state.store."""
        result = _lint(*sets)
        assert 0 != result.returncode
        assert "/state/store" in result.stdout + result.stderr

    @pytest.mark.parametrize("sets", [("replicaCount=3",), ("autoscaling.enabled=true",)],
                             ids=["3 replicas", "autoscaling"])
    def test_with_the_redis_store_it_is_accepted(self, sets):
        """The same values with state.store=redis and its Secret lint clean."""
        result = _lint(*sets, "state.store=redis", "state.redis.urlSecret.name=lw-redis")
        assert 0 == result.returncode, result.stdout + result.stderr

    def test_redis_without_its_secret_is_refused(self):
        """state.store=redis names the Secret holding the URL."""
        result = _lint("state.store=redis")
        assert 0 != result.returncode
        assert "urlSecret/name" in result.stdout + result.stderr
