"""The chart as it is distributed: packaged with `helm package`, pushed to and pulled from a real
OCI registry with `helm push` / `helm pull`, and annotated for Artifact Hub.

The registry is go-containerregistry's (tests/deploy/ociregistry, built by
scripts/install-test-tools.sh): a real OCI distribution API server on a loopback port.

Artifact Hub publishes no linter this machine can install (its `ah` command is not served by the
Go module proxy), so `artifact_hub_problems` repeats the checks its parser makes on each
annotation it reads: artifacthub/hub internal/tracker/source/helm/helm.go
(EnrichPackageFromAnnotations), internal/tracker/source/helpers.go (ParseChangesAnnotation) and
internal/pkg/metadata.go (ValidateChange, the change kinds), internal/hub/package.go (the
categories), at commit 0d8b1c0b9f6b660a815e5481059ce900cd245588.
"""
from __future__ import annotations

import hashlib
import os
import subprocess
import tarfile
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml

from tests.deploy.tooling import CHART, DEFAULT_VALUES, run, tool

CHANGE_KINDS = ("added", "changed", "deprecated", "removed", "fixed", "security")
CATEGORIES = ("ai-machine-learning", "database", "integration-delivery", "monitoring-logging", "networking",
              "security", "storage", "streaming-messaging", "skip-prediction")
# strconv.ParseBool's accepted spellings.
GO_BOOLS = ("1", "t", "T", "TRUE", "true", "True", "0", "f", "F", "FALSE", "false", "False")
BOOLEAN_ANNOTATIONS = ("artifacthub.io/prerelease", "artifacthub.io/containsSecurityUpdates", "artifacthub.io/operator")
LIST_ANNOTATIONS = ("artifacthub.io/links", "artifacthub.io/maintainers", "artifacthub.io/images",
                    "artifacthub.io/crds", "artifacthub.io/crdsExamples", "artifacthub.io/recommendations",
                    "artifacthub.io/screenshots")


def artifact_hub_problems(annotations: dict[str, Any]) -> list[str]:
    """What Artifact Hub's parser would refuse in the chart's annotations (empty: all accepted)."""
    problems = []
    for key, value in annotations.items():
        if key.startswith("artifacthub.io/") and not isinstance(value, str):
            problems.append(f"{key}: annotations are strings, got {type(value).__name__}")
    category = annotations.get("artifacthub.io/category")
    if category is not None and category not in CATEGORIES:
        problems.append(f"artifacthub.io/category: invalid category name {category!r}")
    for key in BOOLEAN_ANNOTATIONS:
        if key in annotations and annotations[key] not in GO_BOOLS:
            problems.append(f"{key}: invalid boolean {annotations[key]!r}")
    for key in LIST_ANNOTATIONS:
        if key in annotations:
            try:
                parsed = yaml.safe_load(annotations[key])
            except yaml.YAMLError as error:
                problems.append(f"{key}: not YAML ({error})")
                continue
            if not isinstance(parsed, list):
                problems.append(f"{key}: must be a YAML list")
    if "artifacthub.io/changes" in annotations:
        problems += change_problems(annotations["artifacthub.io/changes"])
    return problems


def change_problems(text: str) -> list[str]:
    try:
        changes = yaml.safe_load(text)
    except yaml.YAMLError:
        return ["artifacthub.io/changes: invalid changes annotation (not YAML)"]
    if not isinstance(changes, list) or not changes:
        return ["artifacthub.io/changes: must be a non-empty YAML list"]
    problems = []
    for index, change in enumerate(changes):
        where = f"artifacthub.io/changes[{index}]"
        if isinstance(change, str):  # the short form: descriptions only
            continue
        if not isinstance(change, dict):
            problems.append(f"{where}: invalid change entry")
            continue
        kind = change.get("kind", "")
        if kind and str(kind).lower() not in CHANGE_KINDS:
            problems.append(f"{where}: invalid kind: {kind}")
        if not change.get("description"):
            problems.append(f"{where}: description not provided")
        for link in change.get("links", []) or []:
            if not link.get("name") or not link.get("url"):
                problems.append(f"{where}: a link needs a name and a url")
    return problems


def chart_metadata() -> dict[str, Any]:
    loaded = yaml.safe_load((CHART / "Chart.yaml").read_text())
    assert isinstance(loaded, dict)
    return loaded


class TestArtifactHubAnnotations:
    def test_annotations_pass_artifact_hub_s_checks(self) -> None:
        annotations = chart_metadata()["annotations"]
        assert artifact_hub_problems(annotations) == []
        assert annotations["artifacthub.io/category"] == "monitoring-logging"
        assert annotations["artifacthub.io/license"] == "Apache-2.0"
        kinds = [change["kind"] for change in yaml.safe_load(annotations["artifacthub.io/changes"])]
        assert kinds and set(kinds) <= set(CHANGE_KINDS)

    @pytest.mark.parametrize(("key", "value", "problem"), [
        ("artifacthub.io/category", "monitoring", "invalid category name"),
        ("artifacthub.io/prerelease", "no", "invalid boolean"),
        ("artifacthub.io/changes", "- kind: improved\n  description: faster", "invalid kind: improved"),
        ("artifacthub.io/changes", "- kind: added\n", "description not provided"),
        ("artifacthub.io/links", "name: docs", "must be a YAML list"),
    ])
    def test_the_checks_refuse_what_artifact_hub_refuses(self, key: str, value: str, problem: str) -> None:
        """Not a rubber stamp: one wrong value per rule is named."""
        annotations = {**chart_metadata()["annotations"], key: value}
        problems = artifact_hub_problems(annotations)
        assert any(problem in line for line in problems), problems


@pytest.fixture(scope="module")
def package(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """`helm package` of the chart directory."""
    destination = tmp_path_factory.mktemp("charts")
    result = run([tool("helm"), "package", str(CHART), "--destination", str(destination)])
    version = chart_metadata()["version"]
    archive = destination / f"loopwarden-{version}.tgz"
    assert archive.is_file(), result.stdout + result.stderr
    return archive


@pytest.fixture(scope="module")
def registry(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    """A real OCI registry on a loopback port; yields its HOST:PORT."""
    errors = tmp_path_factory.mktemp("oci-registry") / "stderr"
    with errors.open("w") as stderr, subprocess.Popen([tool("oci-registry")], stdout=subprocess.PIPE,
                                                      stderr=stderr, text=True) as process:
        try:
            assert process.stdout is not None
            line = process.stdout.readline()
            assert line.startswith("listening on "), line + errors.read_text()
            yield line.removeprefix("listening on ").strip()
        finally:
            process.terminate()
            process.wait(timeout=10)


class TestPackage:
    def test_package_holds_the_chart_and_not_its_test_suites(self, package: Path) -> None:
        with tarfile.open(package) as archive:
            names = set(archive.getnames())
        for needed in ("Chart.yaml", "values.yaml", "values.schema.json", "README.md",
                       "files/loopwarden-dashboard.json", "files/loopwarden-alerts.yaml",
                       "templates/tests/test-grpc-health.yaml"):
            assert f"loopwarden/{needed}" in names, sorted(names)
        assert not any(name.startswith(("loopwarden/tests/", "loopwarden/ci/")) for name in names)

    def test_packaged_chart_yaml_keeps_the_annotations(self, package: Path) -> None:
        with tarfile.open(package) as archive:
            member = archive.extractfile("loopwarden/Chart.yaml")
            assert member is not None
            packaged = yaml.safe_load(member.read())
        assert packaged["annotations"] == chart_metadata()["annotations"]


class TestOciRegistry:
    def test_push_pull_and_render_from_the_registry(self, package: Path, registry: str, tmp_path: Path) -> None:
        """helm push to the registry, helm show / helm pull back by version: the pulled archive is
        the pushed one byte for byte, and it renders exactly like the chart directory."""
        helm = tool("helm")
        version = chart_metadata()["version"]
        env = {"HELM_REGISTRY_CONFIG": str(tmp_path / "registry.json"), "HELM_CACHE_HOME": str(tmp_path / "cache"),
               "HELM_CONFIG_HOME": str(tmp_path / "config"), "HELM_DATA_HOME": str(tmp_path / "data")}
        env = {**os.environ, **env}
        pushed = run([helm, "push", str(package), f"oci://{registry}/charts", "--plain-http"], env=env)
        assert f"Pushed: {registry}/charts/loopwarden:{version}" in pushed.stdout + pushed.stderr
        reference = f"oci://{registry}/charts/loopwarden"
        shown = run([helm, "show", "chart", reference, "--version", version, "--plain-http"], env=env)
        assert yaml.safe_load(shown.stdout) == chart_metadata()
        pulled_dir = tmp_path / "pulled"
        pulled_dir.mkdir()
        run([helm, "pull", reference, "--version", version, "--plain-http", "--destination", str(pulled_dir)], env=env)
        pulled = pulled_dir / package.name
        assert hashlib.sha256(pulled.read_bytes()).hexdigest() == hashlib.sha256(package.read_bytes()).hexdigest()
        common = ["--namespace", "agents", "--values", str(DEFAULT_VALUES)]
        from_registry = run([helm, "template", "lw", reference, "--version", version, "--plain-http", *common], env=env)
        from_directory = run([helm, "template", "lw", str(CHART), *common], env=env)
        assert from_registry.stdout == from_directory.stdout
        assert "kind: Deployment" in from_registry.stdout

    def test_an_unknown_version_is_refused(self, package: Path, registry: str, tmp_path: Path) -> None:
        """The registry answers for what it holds only: a version never pushed is an error."""
        result = run([tool("helm"), "show", "chart", f"oci://{registry}/charts/loopwarden", "--version", "9.9.9",
                      "--plain-http"], check=False, env={**os.environ, "HELM_CACHE_HOME": str(tmp_path)})
        assert result.returncode != 0
        assert "not found" in (result.stdout + result.stderr).lower()
