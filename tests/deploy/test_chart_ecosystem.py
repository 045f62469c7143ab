"""The chart checked by its ecosystem's own tools: helm-unittest suites and kubeconform.

kubeconform fetches its schemas from the network by default; here it reads the Kubernetes JSON
schemas that kubernetes-validate (a pinned test dependency) ships, converted once per session to
files kubeconform resolves on their own (see `kubeconform_schemas`).
"""
from __future__ import annotations

import json
import os
import re
import shutil
from pathlib import Path
from typing import Any

import pytest
import yaml

from tests.deploy.tooling import (
    ALL_OPTIONAL_VALUES,
    CHART,
    HELM_PLUGINS,
    INSTALL_HINT,
    helm_template,
    run,
    tool,
)

CHART_KUBE_MINIMUM = "1.27.0"
# Checked by tests/deploy/validate_crds.mjs against the prometheus-operator CRD schemas instead.
CRD_KINDS = ("PrometheusRule", "ServiceMonitor")
VALUES_FILES = {"default values": (), "all optional objects on": (ALL_OPTIONAL_VALUES,)}


def helm_unittest(chart: Path) -> Any:
    """`helm unittest --strict CHART` with the plugin that install-test-tools.sh registered."""
    plugin = HELM_PLUGINS / "unittest"
    if not (plugin / "plugin.yaml").is_file() or not os.access(plugin / "untt", os.X_OK):
        pytest.fail(f"the helm-unittest plugin is not installed in {plugin}: {INSTALL_HINT}", pytrace=False)
    env = {**os.environ, "HELM_PLUGINS": str(HELM_PLUGINS), "NO_COLOR": "1"}
    return run([tool("helm"), "unittest", "--strict", str(chart)], check=False, env=env, timeout=300)


def suite_files(chart: Path) -> list[Path]:
    return sorted((chart / "tests").glob("*_test.yaml"))


class TestHelmUnittest:
    def test_every_suite_passes(self) -> None:
        """helm-unittest runs every suite under helm/loopwarden/tests and all of them pass."""
        result = helm_unittest(CHART)
        output = result.stdout + result.stderr
        assert result.returncode == 0, output
        suites = suite_files(CHART)
        assert re.search(rf"Test Suites:\s+{len(suites)} passed, {len(suites)} total", output), output
        assert re.search(r"Tests:\s+\d+ passed, \d+ total", output) and "failed" not in output, output

    def test_suites_cover_the_chart_s_branches(self) -> None:
        """A suite for each branch the issue names: TLS on/off, token, snapshot, HPA,
        NetworkPolicy (egress included), ServiceMonitor/PrometheusRule, dashboard ConfigMap,
        replica spreading and the image requirement."""
        names = " ".join(
            test["it"] for path in suite_files(CHART) for test in yaml.safe_load(path.read_text())["tests"]
        )
        for branch in ("TLS off", "TLS on", "mTLS", "token", "snapshot on", "HPA on", "NetworkPolicy",
                       "egress", "OTLP", "ServiceMonitor", "PrometheusRule", "dashboard ConfigMap",
                       "more than one replica", "image repository", "ephemeral storage"):
            assert branch in names or branch.lower() in names.lower(), branch

    def test_a_broken_chart_fails_its_suites(self, tmp_path: Path) -> None:
        """Not a rubber stamp: the same suites on a copy of the chart whose NetworkPolicy lost its
        Egress policy type fail, and say where."""
        broken = shutil.copytree(CHART, tmp_path / "loopwarden")
        template = broken / "templates" / "networkpolicy.yaml"
        text = template.read_text()
        assert "    - Egress\n" in text
        template.write_text(text.replace("    - Egress\n", "", 1))
        result = helm_unittest(broken)
        output = result.stdout + result.stderr
        assert result.returncode != 0, output
        assert "FAIL  the NetworkPolicy" in output and "spec.policyTypes" in output, output


@pytest.fixture(scope="session")
def kubeconform_schemas(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """kubernetes-validate's strict schemas of the two checked versions, made standalone-resolvable
    for kubeconform: each file names itself with an https `$id` and points at
    `/api/_definitions.json` relative to it, which kubeconform would fetch. Dropping the `$id`s and
    pointing at the sibling `_definitions.json` file keeps every definition and needs no network."""
    import kubernetes_validate

    source = Path(kubernetes_validate.__file__).parent / "kubernetes-json-schema"
    root = tmp_path_factory.mktemp("kubeconform-schemas")

    def localize(node: Any) -> None:
        if isinstance(node, dict):
            node.pop("$id", None)
            ref = node.get("$ref")
            if isinstance(ref, str) and ref.startswith("/api/_definitions.json#"):
                node["$ref"] = ref[len("/api/"):]
            for child in node.values():
                localize(child)
        elif isinstance(node, list):
            for child in node:
                localize(child)

    for version in kube_versions():
        directory = root / f"v{version}-local-strict"
        directory.mkdir()
        files = list((source / directory.name).glob("*.json"))
        assert files, f"kubernetes-validate ships no schemas for Kubernetes {version}"
        for path in files:
            document = json.loads(path.read_text())
            localize(document)
            (directory / path.name).write_text(json.dumps(document))
    return root


def kube_versions() -> list[str]:
    """The oldest Kubernetes the chart supports and the newest kubernetes-validate knows."""
    from kubernetes_validate.utils import latest_version

    return [CHART_KUBE_MINIMUM, latest_version()]


def kubeconform(manifests: str, version: str, schemas: Path) -> tuple[int, dict[str, Any], str]:
    """kubeconform -strict over `manifests` for one Kubernetes version, schemas from `schemas` only."""
    location = str(schemas) + "/{{ .NormalizedKubernetesVersion }}-local{{ .StrictSuffix }}/{{ .ResourceKind }}{{ .KindSuffix }}.json"
    result = run(
        [tool("kubeconform"), "-strict", "-summary", "-output", "json", "-kubernetes-version", version,
         "-schema-location", location, "-skip", ",".join(CRD_KINDS), "-n", "2", "-"],
        input=manifests,
        check=False,
    )
    return result.returncode, json.loads(result.stdout or "{}"), result.stderr


@pytest.mark.parametrize("values_files", VALUES_FILES.values(), ids=VALUES_FILES.keys())
@pytest.mark.parametrize("version_index", [0, 1], ids=["oldest supported Kubernetes", "newest known Kubernetes"])
def test_kubeconform_accepts_the_rendered_chart(
    values_files: tuple[Path, ...], version_index: int, kubeconform_schemas: Path
) -> None:
    """Every built-in object the chart renders (test hook included) is valid for the Kubernetes
    version, strictly: no unknown field, no duplicate key, no object without a schema."""
    version = kube_versions()[version_index]
    manifests = helm_template(*values_files, kube_version=version).stdout
    expected = [d["kind"] for d in yaml.safe_load_all(manifests) if d]
    returncode, report, stderr = kubeconform(manifests, version, kubeconform_schemas)
    assert returncode == 0, json.dumps(report, indent=2) + stderr
    statuses = {(r["kind"], r["name"]): r["status"] for r in report["resources"]}
    not_valid = {key: status for key, status in statuses.items() if status != "statusValid" and key[0] not in CRD_KINDS}
    assert not_valid == {}
    summary = report["summary"]
    crds = sum(kind in CRD_KINDS for kind in expected)
    assert (summary["valid"], summary["skipped"], summary["invalid"], summary["errors"]) == (len(expected) - crds, crds, 0, 0)
    assert "Deployment" in expected and "Pod" in expected


def test_kubeconform_rejects_an_unknown_field(kubeconform_schemas: Path) -> None:
    """Not a rubber stamp: a misspelt container field fails validation, named in the report."""
    version = kube_versions()[0]
    documents = [d for d in yaml.safe_load_all(helm_template(ALL_OPTIONAL_VALUES, kube_version=version).stdout) if d]
    deployment = next(d for d in documents if d["kind"] == "Deployment")
    deployment["spec"]["template"]["spec"]["containers"][0]["imagePullPolice"] = "Always"
    returncode, report, stderr = kubeconform(yaml.safe_dump_all(documents), version, kubeconform_schemas)
    assert returncode == 1, json.dumps(report, indent=2) + stderr
    (invalid,) = [r for r in report["resources"] if r["status"] == "statusInvalid"]
    assert invalid["kind"] == "Deployment"
    assert "imagePullPolice" in invalid["msg"], invalid["msg"]
