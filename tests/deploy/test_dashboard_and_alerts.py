"""The Grafana dashboard (checked with Grafana's own schema) and the Prometheus alert rules
(checked with promtool)."""
from __future__ import annotations

import json
import os
import re
import subprocess
from pathlib import Path
from typing import Any

import yaml

from tests.deploy.tooling import (
    ALERT_TESTS,
    ALERTS,
    CHART,
    DASHBOARD,
    alert_rules,
    dashboard,
    dashboard_exprs,
    dashboard_panels,
    dashboard_variable_queries,
    run,
    substitute_grafana_variables,
    tool,
)


class TestAlertRules:
    def test_promtool_check_rules(self) -> None:
        result = run([tool("promtool"), "check", "rules", str(ALERTS)])
        assert f"SUCCESS: {len(alert_rules())} rules found" in result.stdout

    def test_promtool_unit_tests_pass(self) -> None:
        """tests/deploy/alerts_test.yaml: every alert fires on its synthetic series and stays quiet
        on a near miss (guard aborts and config reload among them)."""
        result = run([tool("promtool"), "test", "rules", str(ALERT_TESTS)], cwd=ALERT_TESTS.parent)
        assert "SUCCESS" in result.stdout

    def test_unit_tests_show_every_alert_firing(self) -> None:
        """Each alert of the rule file, and at least guard abort and config reload, has a unit test
        case in which it fires."""
        tests = yaml.safe_load(ALERT_TESTS.read_text())
        fired = {
            case["alertname"]
            for test in tests["tests"]
            for case in test.get("alert_rule_test", [])
            if case.get("exp_alerts")
        }
        assert {"LoopwardenGuardAbortSpike", "LoopwardenConfigReloadFailing"} <= fired
        assert fired == {rule["alert"] for rule in alert_rules()}

    def test_the_issue_s_alerts_exist(self) -> None:
        names = {rule["alert"] for rule in alert_rules()}
        assert {
            "LoopwardenTargetDown",
            "LoopwardenGuardAbortSpike",
            "LoopwardenBlockRateSpike",
            "LoopwardenEvaluationLatencyHigh",
            "LoopwardenConfigReloadFailing",
            "LoopwardenRunEvictionsUnderPressure",
            "LoopwardenRejectedEventRatioHigh",
        } <= names

    def test_every_alert_has_summary_description_severity_and_a_runbook_in_the_readme(self) -> None:
        readme = (CHART / "README.md").read_text()
        headings = set(re.findall(r"^### (\w+)$", readme, re.MULTILINE))
        for rule in alert_rules():
            annotations = rule["annotations"]
            assert annotations["summary"] and annotations["description"], rule["alert"]
            assert rule["labels"]["severity"] in {"warning", "critical"}, rule["alert"]
            assert rule["alert"] in headings, f"no runbook section for {rule['alert']}"
            assert annotations["runbook_url"].endswith(f"README.md#{rule['alert'].lower()}")
            assert re.search(r"\*\*Meaning\.\*\*", readme.split(f"### {rule['alert']}")[1].split("\n### ")[0])

    def test_every_expression_selects_the_loopwarden_job(self) -> None:
        """The chart rewrites job="loopwarden" on nameOverride, so every selector must spell it so."""
        for rule in alert_rules():
            for selector in re.findall(r"\b\w+\{[^}]*\}", rule["expr"]):
                assert 'job="loopwarden"' in selector, (rule["alert"], selector)


class TestDashboard:
    def test_variables(self) -> None:
        """A datasource variable (so the JSON imports anywhere) and an agent variable."""
        variables = {v["name"]: v for v in dashboard()["templating"]["list"]}
        assert variables["datasource"]["type"] == "datasource"
        assert variables["datasource"]["query"] == "prometheus"
        assert variables["agent"]["type"] == "query"
        assert "agent" in variables["agent"]["query"]["query"]

    def test_every_panel_uses_the_datasource_variable(self) -> None:
        for panel in dashboard_panels():
            if panel["type"] == "row":
                continue
            assert panel["datasource"] == {"type": "prometheus", "uid": "${datasource}"}, panel["title"]
            for target in panel["targets"]:
                assert target["datasource"]["uid"] == "${datasource}", panel["title"]

    def test_standalone_json_has_no_import_placeholders(self) -> None:
        """No __inputs/${DS_...} placeholders: the same file works through the sidecar and Import."""
        text = (CHART / "files" / "loopwarden-dashboard.json").read_text()
        assert "__inputs" not in text and "${DS_" not in text
        assert dashboard()["uid"] and dashboard()["title"]

    def test_panel_ids_are_unique_and_panels_do_not_overlap(self) -> None:
        panels = [p for p in dashboard_panels()]
        ids = [p["id"] for p in panels]
        assert len(ids) == len(set(ids))
        cells = set()
        for panel in panels:
            grid = panel["gridPos"]
            assert grid["x"] + grid["w"] <= 24, panel["title"]
            for x in range(grid["x"], grid["x"] + grid["w"]):
                for y in range(grid["y"], grid["y"] + grid["h"]):
                    assert (x, y) not in cells, f"{panel['title']} overlaps at {(x, y)}"
                    cells.add((x, y))

    def test_panels_the_issue_asks_for(self) -> None:
        exprs = [expr for _, expr in dashboard_exprs()]

        def has(pattern: str) -> bool:
            return any(re.search(pattern, expr) for expr in exprs)

        assert has(r"by \(detector\) \(rate\(loopwarden_warnings_total")
        assert has(r"by \(detector\) \(rate\(loopwarden_blocks_total")
        assert has(r"rate\(loopwarden_guard_aborts_total")
        assert has(r"by \(action\) \(rate\(loopwarden_verdicts_total")
        for quantile in ("0.5", "0.9", "0.99"):
            assert has(rf"histogram_quantile\({quantile}, sum by \(le\) \(rate\(loopwarden_evaluation_duration_seconds_bucket")
        assert has(r"loopwarden_active_runs") and has(r"loopwarden_active_streams")
        assert has(r"by \(reason\) \(rate\(loopwarden_run_evictions_total")
        assert has(r"by \(error_code\) \(rate\(loopwarden_rejected_events_total")
        assert has(r"loopwarden_config_last_reload_successful")
        assert has(r"loopwarden_config_reloads_total")

    def test_agent_variable_filters_every_per_agent_metric(self) -> None:
        for title, expr in dashboard_exprs():
            for selector in re.findall(r"(loopwarden_(?:warnings|blocks|guard_aborts|verdicts)_total)\{([^}]*)\}", expr):
                assert 'agent=~"$agent"' in selector[1], title

    def test_every_query_is_valid_promql(self, tmp_path: Path) -> None:
        """promtool parses every panel and variable query (Grafana variables filled in as with All)."""
        rules = [
            {"record": f"dashboard:panel_{index}", "expr": substitute_grafana_variables(expr)}
            for index, (_, expr) in enumerate(dashboard_exprs())
        ]
        for name, query in dashboard_variable_queries():
            # label_values(SELECTOR, label) is Grafana's; its selector must be valid PromQL.
            selector = re.fullmatch(r"label_values\((.*),\s*\w+\)", query).group(1)
            rules.append({"record": f"dashboard:variable_{name}", "expr": substitute_grafana_variables(selector)})
        path = tmp_path / "dashboard-queries.yaml"
        path.write_text(yaml.safe_dump({"groups": [{"name": "dashboard", "rules": rules}]}))
        result = run([tool("promtool"), "check", "rules", str(path)])
        assert f"SUCCESS: {len(rules)} rules found" in result.stdout


# The Go module that checks the dashboard with the Grafana Foundation SDK (dashboard_test.go).
GRAFANA_MODULE = Path(__file__).with_name("grafana")


def go_test(*args: str) -> subprocess.CompletedProcess[str]:
    """`go test` in the Grafana module: local toolchain only, modules as go.sum pins them."""
    env = {**os.environ, "GOTOOLCHAIN": "local", "GOFLAGS": "-mod=readonly -buildvcs=false"}
    return run([tool("go"), "test", "-count=1", *args], cwd=GRAFANA_MODULE, env=env, timeout=600, check=False)


class TestDashboardSchema:
    def test_grafana_sdk_decodes_strictly_and_validates(self) -> None:
        """The Grafana Foundation SDK decodes the dashboard strictly (every panel's options and
        every Prometheus query included) and its validation passes; the Go tests also show that
        an unknown field at each level fails."""
        result = go_test("-v", ".")
        output = result.stdout + result.stderr
        assert result.returncode == 0, output
        for name in ("TestDashboardMatchesGrafanaSchema", "TestEveryPanelTypeIsDecodedStrictly", "TestInjectedUnknownFieldsFail"):
            assert f"--- PASS: {name}" in output, output

    def test_an_unknown_field_fails_the_schema_check(self, tmp_path: Path) -> None:
        """Not a rubber stamp: the same test on a copy of the dashboard with a misspelt option in
        a stat panel fails, naming the panel and the field."""
        board = json.loads(DASHBOARD.read_text())
        stat = next(panel for panel in board["panels"] if panel["type"] == "stat")
        stat["options"]["colourMode"] = stat["options"]["colorMode"]
        broken = tmp_path / "dashboard.json"
        broken.write_text(json.dumps(board, indent=2))
        result = go_test("-run", "^TestDashboardMatchesGrafanaSchema$", ".", "-args", f"-dashboard={broken}")
        output = result.stdout + result.stderr
        assert result.returncode == 1, output
        panel = re.escape(f'(panel id {stat["id"]} "{stat["title"]}").options')
        assert re.search(panel + r"\S*: unexpected field 'colourMode'", output), output


# ---------------------------------------------------------------------------------------------
# The importable copy (deploy/grafana/loopwarden-dashboard.json, scripts/gen_dashboard_import.py)

IMPORTABLE = CHART.parent.parent / "deploy" / "grafana" / "loopwarden-dashboard.json"


def load_generator() -> Any:
    import importlib.util

    spec = importlib.util.spec_from_file_location("gen_dashboard_import", CHART.parent.parent / "scripts" / "gen_dashboard_import.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


class TestImportableDashboard:
    def test_copy_is_fresh(self) -> None:
        """The committed copy is what the generator writes from the chart's dashboard today."""
        assert IMPORTABLE.read_text() == load_generator().render(), "run python3 scripts/gen_dashboard_import.py"

    def test_check_names_a_stale_copy(self, tmp_path: Path, monkeypatch: Any, capsys: Any) -> None:
        generator = load_generator()
        stale = tmp_path / "loopwarden-dashboard.json"
        stale.write_text(IMPORTABLE.read_text().replace('"loopwarden"', '"loopwarden (old)"', 1))
        monkeypatch.setattr(generator, "TARGET", stale)
        monkeypatch.setattr(generator, "REPO", tmp_path)
        assert generator.main(["--check"]) == 1
        assert "is stale" in capsys.readouterr().err
        generator.main([])
        assert generator.main(["--check"]) == 0

    def test_every_placeholder_is_an_input_and_every_input_is_used(self) -> None:
        """Grafana's import page replaces `${NAME}` of each `__inputs` entry; a placeholder without
        an input would stay in the dashboard as text, an input without a placeholder asks for
        nothing."""
        text = IMPORTABLE.read_text()
        board = json.loads(text)
        declared = {entry["name"] for entry in board["__inputs"]}
        used = set(re.findall(r"\$\{(DS_[A-Z_]+)\}", text))
        assert declared == used == {"DS_PROMETHEUS"}
        source = board["__inputs"][0]
        assert (source["type"], source["pluginId"]) == ("datasource", "prometheus")
        variable = next(v for v in board["templating"]["list"] if v["name"] == "datasource")
        assert variable["current"]["value"] == "${DS_PROMETHEUS}"

    def test_requires_lists_grafana_prometheus_and_every_panel_plugin(self) -> None:
        board = json.loads(IMPORTABLE.read_text())
        required = {(entry["type"], entry["id"]) for entry in board["__requires"]}
        panels = {("panel", panel["type"]) for panel in dashboard_panels() if panel["type"] != "row"}
        assert required == {("grafana", "grafana"), ("datasource", "prometheus")} | panels
        assert board["__elements"] == {} and board["id"] is None

    def test_the_dashboard_itself_is_the_chart_s(self) -> None:
        """Only the envelope, the id and the data source variable's default differ from the file
        the chart ships: one dashboard, two ways in."""
        board = json.loads(IMPORTABLE.read_text())
        for key in ("__inputs", "__elements", "__requires", "id"):
            board.pop(key)
        source = dashboard()
        source.pop("id", None)
        for variables in (board["templating"]["list"], source["templating"]["list"]):
            next(v for v in variables if v["name"] == "datasource").pop("current")
        assert board == source

    def test_grafana_sdk_decodes_the_importable_copy(self) -> None:
        """The Grafana Foundation SDK check passes on the importable copy too (its import envelope
        taken off, as Grafana's import does)."""
        result = go_test("-v", "-run", "^TestDashboardMatchesGrafanaSchema$", ".", "-args", f"-dashboard={IMPORTABLE}")
        output = result.stdout + result.stderr
        assert result.returncode == 0, output
        assert "--- PASS: TestDashboardMatchesGrafanaSchema" in output, output
