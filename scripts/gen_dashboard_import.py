"""Write the importable copy of the Grafana dashboard: deploy/grafana/loopwarden-dashboard.json.

The chart's `helm/loopwarden/files/loopwarden-dashboard.json` is the one source. It is what the
Grafana sidecar, a file provider and the HTTP API load as it is, so it carries no placeholder.
The copy written here adds what Grafana's *Dashboards > Import* page (and grafana.com) read, the
way Grafana's own "Export for sharing externally" writes it:
- `__inputs`: one data source input, DS_PROMETHEUS; the import page asks for it and replaces every
  `${DS_PROMETHEUS}` in the file with the chosen data source. Here that is the default of the
  dashboard's `datasource` variable, so the dashboard opens on the data source chosen at import;
- `__requires`: the Grafana version, the Prometheus data source plugin and each panel plugin the
  dashboard uses, which the import page lists before importing;
- `__elements`: the library panels (none);
- `id` null, so an import never overwrites another dashboard by its numeric id.

    python3 scripts/gen_dashboard_import.py          # write it
    python3 scripts/gen_dashboard_import.py --check  # exit 1 when the copy is stale
"""
from __future__ import annotations

import argparse
import copy
import json
import sys
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parent.parent
SOURCE = REPO / "helm" / "loopwarden" / "files" / "loopwarden-dashboard.json"
TARGET = REPO / "deploy" / "grafana" / "loopwarden-dashboard.json"

DATASOURCE_INPUT = "DS_PROMETHEUS"
DATASOURCE_VARIABLE = "datasource"
# schemaVersion 39 is what Grafana 10.4 writes; older versions would migrate the file down-level.
GRAFANA_VERSION = "10.4.0"
# The names Grafana gives its core panel plugins in an export (`row` is not a plugin).
PANEL_NAMES = {"stat": "Stat", "table": "Table", "timeseries": "Time series", "gauge": "Gauge",
               "bargauge": "Bar gauge", "text": "Text", "heatmap": "Heatmap", "piechart": "Pie chart"}
IMPORT_ENVELOPE = ("__inputs", "__elements", "__requires")


def panel_types(panels: list[dict[str, Any]]) -> set[str]:
    found: set[str] = set()
    for panel in panels:
        if panel["type"] != "row":
            found.add(panel["type"])
        found |= panel_types(panel.get("panels", []))
    return found


def importable(board: dict[str, Any]) -> dict[str, Any]:
    """The dashboard with Grafana's import envelope, its keys first as Grafana writes them."""
    body = copy.deepcopy(board)
    variables = {variable["name"]: variable for variable in body["templating"]["list"]}
    variable = variables.get(DATASOURCE_VARIABLE)
    if variable is None or variable["type"] != "datasource" or variable["query"] != "prometheus":
        raise SystemExit(f"{SOURCE}: expected a Prometheus data source variable named {DATASOURCE_VARIABLE!r}")
    placeholder = "${" + DATASOURCE_INPUT + "}"
    variable["current"] = {"selected": False, "text": placeholder, "value": placeholder}
    body["id"] = None
    unknown = panel_types(body["panels"]) - PANEL_NAMES.keys()
    if unknown:
        raise SystemExit(f"{SOURCE}: add the export names of the panel types {sorted(unknown)} to PANEL_NAMES")
    requires = [
        {"type": "grafana", "id": "grafana", "name": "Grafana", "version": GRAFANA_VERSION},
        {"type": "datasource", "id": "prometheus", "name": "Prometheus", "version": "1.0.0"},
        *({"type": "panel", "id": kind, "name": PANEL_NAMES[kind], "version": ""}
          for kind in sorted(panel_types(body["panels"]))),
    ]
    inputs = [{
        "name": DATASOURCE_INPUT,
        "label": "Prometheus",
        "description": "The Prometheus that scrapes loopwarden (scrape job \"loopwarden\").",
        "type": "datasource",
        "pluginId": "prometheus",
        "pluginName": "Prometheus",
    }]
    return {"__inputs": inputs, "__elements": {}, "__requires": requires, **body}


def render() -> str:
    return json.dumps(importable(json.loads(SOURCE.read_text())), indent=2, ensure_ascii=False) + "\n"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--check", action="store_true", help="exit 1 when the importable copy is stale")
    args = parser.parse_args(argv)
    text = render()
    if args.check:
        if not TARGET.is_file() or TARGET.read_text() != text:
            print(f"{TARGET.relative_to(REPO)} is stale: run python3 scripts/gen_dashboard_import.py", file=sys.stderr)
            return 1
        return 0
    TARGET.parent.mkdir(parents=True, exist_ok=True)
    TARGET.write_text(text)
    print(f"wrote {TARGET.relative_to(REPO)}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
