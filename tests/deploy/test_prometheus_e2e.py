"""A real Prometheus server scrapes a real daemon; the blocks counter, the alert rules and every
dashboard query are checked through Prometheus' HTTP API. Loopback only, temporary data dir."""
from __future__ import annotations

import json
import re
import subprocess
import time
import urllib.parse
from collections.abc import Iterator
from dataclasses import dataclass
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

import pytest
import yaml

from tests.deploy import scenario
from tests.deploy.tooling import (
    ALERTS,
    alert_rules,
    dashboard_exprs,
    free_port,
    http_get,
    stop,
    substitute_grafana_variables,
    tool,
    wait_for,
)
from tests.support.daemon import running_daemon

SCRAPE_INTERVAL = "1s"
STARTUP_TIMEOUT = 60
QUERY_TIMEOUT = 60


@dataclass(frozen=True)
class Stack:
    prometheus_url: str
    metrics_target: str
    scenario: scenario.ScenarioResult


def _start_prometheus(workdir: Path, target: str) -> tuple[subprocess.Popen[bytes], str]:
    config = {
        "global": {"scrape_interval": SCRAPE_INTERVAL, "evaluation_interval": SCRAPE_INTERVAL},
        "rule_files": [str(ALERTS)],
        "scrape_configs": [{"job_name": "loopwarden", "static_configs": [{"targets": [target]}]}],
    }
    config_path = workdir / "prometheus.yml"
    config_path.write_text(yaml.safe_dump(config))
    binary = tool("prometheus")
    for _attempt in range(3):  # a free port can be taken between the probe and prometheus' bind
        port = free_port()
        log = (workdir / f"prometheus-{port}.log").open("wb")
        process = subprocess.Popen(
            [
                binary,
                f"--config.file={config_path}",
                f"--storage.tsdb.path={workdir / 'data'}",
                "--storage.tsdb.retention.time=1h",
                f"--web.listen-address=127.0.0.1:{port}",
                "--log.level=warn",
            ],
            stdout=log,
            stderr=subprocess.STDOUT,
            cwd=workdir,
        )
        log.close()
        url = f"http://127.0.0.1:{port}"

        def ready(process: subprocess.Popen = process, url: str = url) -> bool | None:  # this attempt's
            if process.poll() is not None:
                return False
            return True if http_get(f"{url}/-/ready", timeout=2) else None

        if wait_for("prometheus to become ready", ready, timeout=STARTUP_TIMEOUT):
            return process, url
        process.wait(timeout=10)
    logs = "\n".join(p.read_text() for p in workdir.glob("prometheus-*.log"))
    pytest.fail(f"prometheus did not start:\n{logs}")


@pytest.fixture(scope="module")
def stack(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Stack]:
    workdir = tmp_path_factory.mktemp("prometheus")
    with running_daemon(scenario.CONFIG) as daemon:
        result = scenario.drive(daemon.grpc_target)
        target = f"127.0.0.1:{daemon.metrics_port}"
        process, url = _start_prometheus(workdir, target)
        try:
            yield Stack(prometheus_url=url, metrics_target=target, scenario=result)
        finally:
            stop(process, grace=15)


def api(stack: Stack, path: str, **params: str) -> Any:
    query = urllib.parse.urlencode(params)
    body = json.loads(http_get(f"{stack.prometheus_url}/api/v1/{path}?{query}"))
    assert body["status"] == "success", body
    return body["data"]


def instant(stack: Stack, promql: str) -> list[dict[str, Any]]:
    data = api(stack, "query", query=promql)
    assert data["resultType"] == "vector", data
    return data["result"]


def wait_for_value(stack: Stack, promql: str, expected: float) -> list[dict[str, Any]]:
    def probe() -> list[dict[str, Any]] | None:
        result = instant(stack, promql)
        return result if result and all(float(s["value"][1]) == expected for s in result) else None

    return wait_for(f"{promql} == {expected} in Prometheus", probe, timeout=QUERY_TIMEOUT)


def _timestamp(rfc3339: str) -> datetime:
    """Prometheus' RFC 3339 timestamps carry up to nanoseconds; datetime takes microseconds."""
    return datetime.fromisoformat(re.sub(r"(\.\d{6})\d+", r"\1", rfc3339))


class TestPrometheusEndToEnd:
    def test_target_is_up(self, stack: Stack) -> None:
        (series,) = wait_for_value(stack, 'up{job="loopwarden"}', 1)
        assert series["metric"]["instance"] == stack.metrics_target

    def test_blocks_counter_has_the_scenario_s_value(self, stack: Stack) -> None:
        """The scenario blocked exactly one call (generic_repeat, agent default): Prometheus says 1."""
        expected = sum(scenario.EXPECTED_BLOCKS.values())
        (total,) = wait_for_value(stack, 'sum(loopwarden_blocks_total{job="loopwarden"})', expected)
        assert float(total["value"][1]) == 1
        (series,) = instant(stack, 'loopwarden_blocks_total{job="loopwarden"} > 0')
        assert (series["metric"]["detector"], series["metric"]["agent"]) == ("generic_repeat", "default")
        assert float(series["value"][1]) == 1

    def test_warnings_and_guard_aborts_have_the_scenario_s_values(self, stack: Stack) -> None:
        wait_for_value(stack, 'sum(loopwarden_warnings_total{job="loopwarden"})', sum(scenario.EXPECTED_WARNINGS.values()))
        (abort,) = wait_for_value(stack, 'loopwarden_guard_aborts_total{job="loopwarden"}', 1)
        assert abort["metric"]["agent"] == "default"

    def test_alert_rules_load_and_evaluate_cleanly(self, stack: Stack) -> None:
        """Prometheus loads the rule file and evaluates every rule against the real series without
        error; with a healthy daemon and a single block, none of them is pending or firing."""
        expected = {rule["alert"] for rule in alert_rules()}
        wait_for_value(stack, 'up{job="loopwarden"}', 1)
        scraped_at = datetime.now(timezone.utc)

        def evaluated_after_first_scrape() -> list[dict[str, Any]] | None:
            rules = [r for g in api(stack, "rules")["groups"] for r in g["rules"]]
            done = {r["name"] for r in rules if _timestamp(r["lastEvaluation"]) > scraped_at}
            return rules if done >= expected else None

        rules = wait_for("every alert rule to be evaluated on scraped data", evaluated_after_first_scrape, timeout=QUERY_TIMEOUT)
        assert {r["name"] for r in rules} == expected
        assert [(r["name"], r["lastError"]) for r in rules if r["health"] != "ok"] == []
        assert [(r["name"], r["state"]) for r in rules if r["state"] != "inactive"] == []

    def test_every_dashboard_query_returns_data(self, stack: Stack) -> None:
        """Each panel query, as Grafana sends it with All selected, returns series from the real scrape."""
        wait_for(
            "two scrapes inside the rate window",
            lambda: instant(stack, 'rate(loopwarden_verdicts_total{job="loopwarden"}[1m])') or None,
            timeout=QUERY_TIMEOUT,
        )
        time.sleep(1)  # one more scrape, so every family has two points in the window
        empty = [
            (title, expr)
            for title, expr in dashboard_exprs()
            if not instant(stack, substitute_grafana_variables(expr))
        ]
        assert empty == []
