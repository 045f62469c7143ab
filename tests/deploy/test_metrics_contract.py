"""Every metric the dashboard and the alerts query exists in a real scrape of a running daemon."""
from __future__ import annotations

from collections.abc import Iterator

import pytest
from prometheus_client.parser import text_string_to_metric_families

from tests.deploy import scenario
from tests.deploy.tooling import (
    TARGET_LABELS,
    alert_rules,
    dashboard_exprs,
    dashboard_variable_queries,
    label_names,
    metric_names,
)
from tests.support.daemon import running_daemon

SUFFIXES = {"counter": ("_total", "_created"), "histogram": ("_bucket", "_sum", "_count", "_created"), "gauge": ("",)}


@pytest.fixture(scope="module")
def scrape(tmp_path_factory) -> Iterator[str]:
    """The /metrics text of a daemon that has given one warning, one block and one guard abort
    (with a state store, so the state alerts' metrics are there too)."""
    state = tmp_path_factory.mktemp("state") / "runs.state"
    with running_daemon(scenario.CONFIG, ["--state-store", f"file:{state}"]) as daemon:
        scenario.drive(daemon.grpc_target)
        yield daemon.scrape()


def exposed(scrape_text: str) -> dict[str, set[str]]:
    """Sample name -> label names, from the samples and from the TYPE lines (a family without
    samples yet still names its series)."""
    names: dict[str, set[str]] = {}
    for family in text_string_to_metric_families(scrape_text):
        for suffix in SUFFIXES.get(family.type, ("",)):
            names.setdefault(family.name + suffix, set())
        for sample in family.samples:
            names.setdefault(sample.name, set()).update(sample.labels)
    return names


def queries() -> list[tuple[str, str]]:
    out = [(f"dashboard panel {title!r}", expr) for title, expr in dashboard_exprs()]
    out += [(f"dashboard variable {name!r}", query) for name, query in dashboard_variable_queries()]
    out += [(f"alert {rule['alert']}", rule["expr"]) for rule in alert_rules()]
    return out


class TestMetricsContract:
    def test_scenario_counts_are_in_the_scrape(self, scrape: str) -> None:
        """The scrape shows the scenario: one warning and one block by generic_repeat, one guard abort."""
        samples = {
            (s.name, tuple(sorted(s.labels.items()))): s.value
            for family in text_string_to_metric_families(scrape)
            for s in family.samples
        }
        for (detector, agent), count in scenario.EXPECTED_WARNINGS.items():
            assert samples[("loopwarden_warnings_total", (("agent", agent), ("detector", detector)))] == count
        for (detector, agent), count in scenario.EXPECTED_BLOCKS.items():
            assert samples[("loopwarden_blocks_total", (("agent", agent), ("detector", detector)))] == count
        for agent, count in scenario.EXPECTED_GUARD_ABORTS.items():
            assert samples[("loopwarden_guard_aborts_total", (("agent", agent),))] == count

    def test_every_queried_metric_name_is_exported(self, scrape: str) -> None:
        names = exposed(scrape)
        missing = [
            (where, name)
            for where, expr in queries()
            for name in metric_names(expr)
            if name != "up" and name not in names
        ]
        assert missing == []
        used = {name for _, expr in queries() for name in metric_names(expr)}
        assert len(used) >= 10, used

    def test_every_queried_label_is_on_the_metrics_it_filters(self, scrape: str) -> None:
        """Labels in matchers and by() clauses are labels the daemon really attaches (or target labels
        Prometheus adds)."""
        names = exposed(scrape)
        wrong = []
        for where, expr in queries():
            ours = {n for n in metric_names(expr) if n != "up"}
            if not ours:
                continue
            available = set().union(*(names.get(n, set()) for n in ours)) | TARGET_LABELS
            wrong += [(where, label) for label in label_names(expr) - available]
        assert wrong == []

    def test_metrics_of_the_interface_are_all_exported(self, scrape: str) -> None:
        """The daemon's documented metrics (the ones the chart README lists) are all in the scrape."""
        names = exposed(scrape)
        documented = {
            "loopwarden_warnings_total": {"detector", "agent"},
            "loopwarden_blocks_total": {"detector", "agent"},
            "loopwarden_guard_aborts_total": {"agent"},
            "loopwarden_verdicts_total": {"action", "detector", "agent", "integration"},
            "loopwarden_events_total": {"kind"},
            "loopwarden_rejected_events_total": {"error_code"},
            "loopwarden_evaluation_duration_seconds_bucket": {"le"},
            "loopwarden_active_runs": set(),
            "loopwarden_active_streams": set(),
            "loopwarden_run_evictions_total": {"reason"},
            "loopwarden_config_reloads_total": {"result"},
            "loopwarden_config_last_reload_successful": set(),
            "loopwarden_build_info": {"version", "python_version", "grpc_version", "engine"},
        }
        for name, labels in documented.items():
            assert name in names, name
            assert labels <= names[name], (name, names[name])
