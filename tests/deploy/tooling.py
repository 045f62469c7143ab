"""Shared helpers of the deploy tests: where the real tools are, rendering the chart, free ports.

The tools (helm, kubectl, promtool, prometheus, the CRD schema package, kubeconform and the
helm-unittest plugin) are installed by scripts/install-test-tools.sh into .cache/tools. A missing
tool fails the test that needs it: a deploy check that silently skips in CI checks nothing.
"""
from __future__ import annotations

import json
import os
import re
import shutil
import socket
import subprocess
import time
import urllib.error
import urllib.request
from collections.abc import Callable, Iterable, Sequence
from functools import cache
from pathlib import Path
from typing import Any, TypeVar

import pytest
import yaml

REPO = Path(__file__).resolve().parents[2]
TOOLS_BIN = REPO / ".cache" / "tools" / "bin"
CRD_MODELS = REPO / ".cache" / "tools" / "npm" / "node_modules"
HELM_PLUGINS = REPO / ".cache" / "tools" / "helm-plugins"
CHART = REPO / "helm" / "loopwarden"
# The chart's defaults plus the one value without a default, image.repository.
DEFAULT_VALUES = CHART / "ci" / "default-values.yaml"
ALL_OPTIONAL_VALUES = CHART / "ci" / "all-optional-values.yaml"
DASHBOARD = CHART / "files" / "loopwarden-dashboard.json"
ALERTS = CHART / "files" / "loopwarden-alerts.yaml"
ALERT_TESTS = Path(__file__).with_name("alerts_test.yaml")
DOCKERFILE = REPO / "server" / "Dockerfile"
DOCKERIGNORE = REPO / ".dockerignore"
INSTALL_HINT = "run `bash scripts/install-test-tools.sh` (or `make tools`)"

# Labels that Prometheus or the Kubernetes service discovery attach, not the daemon.
TARGET_LABELS = frozenset({"job", "instance", "namespace", "pod", "service", "container", "endpoint", "le"})

T = TypeVar("T")


def tool(name: str) -> str:
    """Path of a tool: .cache/tools/bin first, then PATH; fails the test when it is missing."""
    cached = TOOLS_BIN / name
    if cached.exists() and os.access(cached, os.X_OK):
        return str(cached)
    found = shutil.which(name)
    if found is None:
        pytest.fail(f"{name} is not installed: {INSTALL_HINT}", pytrace=False)
    return found


def venv_script(name: str) -> str:
    """A console script of the project's environment (the venv running pytest), e.g. loopwarden."""
    import sys

    candidate = Path(sys.executable).with_name(name)
    if candidate.exists():
        return str(candidate)
    found = shutil.which(name)
    if found is None:
        pytest.fail(f"console script {name!r} not found next to {sys.executable} or on PATH: pip install -e '.[test]'")
    return found


def run(argv: Sequence[str], *, timeout: float = 120, check: bool = True, **kwargs: Any) -> subprocess.CompletedProcess[str]:
    """Run a command, capture its output, and fail with that output when it fails."""
    result = subprocess.run(list(argv), capture_output=True, text=True, timeout=timeout, **kwargs)
    if check and result.returncode != 0:
        pytest.fail(
            f"`{' '.join(argv)}` exited {result.returncode}\n--- stdout\n{result.stdout}\n--- stderr\n{result.stderr}",
            pytrace=False,
        )
    return result


# ---------------------------------------------------------------------------------------------
# The chart


def helm_template(
    *values_files: Path,
    sets: Sequence[str] = (),
    set_json: Sequence[str] = (),
    kube_version: str | None = None,
    release: str = "lw",
    namespace: str = "agents",
    check: bool = True,
) -> subprocess.CompletedProcess[str]:
    """`helm template` over ci/default-values.yaml (the image), then `values_files` and the sets."""
    argv = [tool("helm"), "template", release, str(CHART), "--namespace", namespace, "--values", str(DEFAULT_VALUES)]
    for path in values_files:
        argv += ["--values", str(path)]
    for item in sets:
        argv += ["--set", item]
    for item in set_json:
        argv += ["--set-json", item]
    if kube_version:
        argv += ["--kube-version", kube_version]
    return run(argv, check=check)


def render(*values_files: Path, **kwargs: Any) -> list[dict[str, Any]]:
    """The chart's objects (helm template, test hooks included) as dicts."""
    return [doc for doc in yaml.safe_load_all(helm_template(*values_files, **kwargs).stdout) if doc]


def find(objects: Iterable[dict[str, Any]], kind: str, name_suffix: str = "") -> dict[str, Any]:
    matches = [o for o in objects if o["kind"] == kind and o["metadata"]["name"].endswith(name_suffix)]
    assert len(matches) == 1, f"expected one {kind} named *{name_suffix}, got {[o['metadata']['name'] for o in matches]}"
    return matches[0]


def kinds(objects: Iterable[dict[str, Any]]) -> list[str]:
    return sorted(o["kind"] for o in objects)


@cache
def values() -> dict[str, Any]:
    return yaml.safe_load((CHART / "values.yaml").read_text())


def daemon_container(objects: Iterable[dict[str, Any]]) -> dict[str, Any]:
    deployment = find(objects, "Deployment")
    (container,) = [c for c in deployment["spec"]["template"]["spec"]["containers"] if c["name"] == "loopwarden"]
    return container


def flag_values(args: Sequence[str]) -> dict[str, str | None]:
    """`--flag value` / `--flag=value` / bare `--flag` pairs of an argument vector."""
    parsed: dict[str, str | None] = {}
    index = 0
    while index < len(args):
        arg = args[index]
        assert arg.startswith("--"), f"unexpected positional argument {arg!r} in {args}"
        if "=" in arg:
            name, value = arg.split("=", 1)
            parsed[name] = value
            index += 1
        elif index + 1 < len(args) and not args[index + 1].startswith("--"):
            parsed[arg] = args[index + 1]
            index += 2
        else:
            parsed[arg] = None
            index += 1
    return parsed


# ---------------------------------------------------------------------------------------------
# Queries of the dashboard and the alerts

def dashboard() -> dict[str, Any]:
    return json.loads(DASHBOARD.read_text())


def dashboard_panels() -> list[dict[str, Any]]:
    def walk(panels: list[dict[str, Any]]) -> Iterable[dict[str, Any]]:
        for panel in panels:
            yield panel
            yield from walk(panel.get("panels", []))

    return list(walk(dashboard()["panels"]))


def dashboard_exprs() -> list[tuple[str, str]]:
    """(panel title, PromQL) of every panel target."""
    return [(p["title"], t["expr"]) for p in dashboard_panels() for t in p.get("targets", [])]


def dashboard_variable_queries() -> list[tuple[str, str]]:
    out = []
    for variable in dashboard()["templating"]["list"]:
        if variable["type"] == "query":
            query = variable["query"]["query"] if isinstance(variable["query"], dict) else variable["query"]
            out.append((variable["name"], query))
    return out


def alert_rules() -> list[dict[str, Any]]:
    return [rule for group in yaml.safe_load(ALERTS.read_text())["groups"] for rule in group["rules"]]


def substitute_grafana_variables(expr: str, job: str = "loopwarden", rate_interval: str = "1m", range_: str = "5m") -> str:
    """A dashboard query as Grafana would send it with All selected."""
    return (
        expr.replace("$__rate_interval", rate_interval)
        .replace("$__range", range_)
        .replace("$__interval", "15s")
        .replace('"$job"', f'"{job}"')
        .replace('"$instance"', '".*"')
        .replace('"$agent"', '".*"')
    )


def metric_names(expr: str) -> set[str]:
    """Metric names of a PromQL expression: ours all start with loopwarden_, plus `up`."""
    names = set(re.findall(r"\b(loopwarden_[a-z0-9_]+)\b", expr))
    if re.search(r"\bup\s*\{", expr):
        names.add("up")
    return names


def label_names(expr: str) -> set[str]:
    """Label names a PromQL expression matches on or groups by."""
    labels: set[str] = set()
    for body in re.findall(r"\{([^}]*)\}", expr):
        labels.update(re.findall(r"([a-zA-Z_][a-zA-Z0-9_]*)\s*(?:=~|!~|!=|=)", body))
    for body in re.findall(r"\b(?:by|without)\s*\(([^)]*)\)", expr):
        labels.update(name.strip() for name in body.split(",") if name.strip())
    return labels


# ---------------------------------------------------------------------------------------------
# Processes and ports


def free_port() -> int:
    """A TCP port that was free on 127.0.0.1 a moment ago (for tools that cannot bind port 0)."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def wait_for(what: str, probe: Callable[[], T | None], timeout: float, interval: float = 0.25) -> T:
    """Call `probe` until it returns something other than None, at most `timeout` seconds."""
    deadline = time.monotonic() + timeout
    last_error: BaseException | None = None
    while True:
        try:
            result = probe()
            if result is not None:
                return result
        except (OSError, urllib.error.URLError, ValueError, KeyError) as exc:
            last_error = exc
        if time.monotonic() >= deadline:
            pytest.fail(f"timed out after {timeout:.0f}s waiting for {what} (last error: {last_error!r})", pytrace=False)
        time.sleep(interval)


def http_get(url: str, timeout: float = 5) -> bytes:
    assert url.startswith("http://127.0.0.1:"), f"tests only talk to loopback, not {url}"
    with urllib.request.urlopen(url, timeout=timeout) as response:  # loopback only
        return response.read()


def stop(process: subprocess.Popen[Any], grace: float = 10) -> None:
    """SIGTERM, then SIGKILL after `grace` seconds; always reaps the process."""
    if process.poll() is None:
        process.terminate()
        try:
            process.wait(timeout=grace)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait(timeout=grace)


# ---------------------------------------------------------------------------------------------
# Running the daemon as the chart's pod would


def make_certificates(directory: Path) -> Path:
    """With the real `openssl`: a CA (ca.pem/ca.key), a server certificate for 127.0.0.1 and
    localhost (server.pem/server.key) and a client certificate (client.pem/client.key), both
    signed by that CA. EC P-256 keys, valid two days."""
    openssl = shutil.which("openssl")
    if openssl is None:
        pytest.fail("openssl is required to make the test certificates", pytrace=False)
    directory.mkdir(parents=True, exist_ok=True)

    def sh(*args: str) -> None:
        run([openssl, *args], cwd=directory, timeout=60)

    key = ("-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:prime256v1", "-nodes")
    sh("req", "-x509", *key, "-keyout", "ca.key", "-out", "ca.pem", "-days", "2", "-subj", "/CN=loopwarden-test-ca")
    for name, extension in (("server", "subjectAltName=IP:127.0.0.1,DNS:localhost"), ("client", "extendedKeyUsage=clientAuth")):
        sh("req", *key, "-keyout", f"{name}.key", "-out", f"{name}.csr", "-subj", f"/CN=loopwarden-test-{name}")
        (directory / f"{name}.ext").write_text(extension + "\n")
        sh("x509", "-req", "-in", f"{name}.csr", "-CA", "ca.pem", "-CAkey", "ca.key", "-CAcreateserial",
           "-out", f"{name}.pem", "-days", "2", "-extfile", f"{name}.ext")
    return directory


def materialize_mounts(objects: Sequence[dict[str, Any]], root: Path, secrets: dict[str, dict[str, bytes]]) -> dict[str, Path]:
    """A local directory for each volume mount of the daemon container, filled as the kubelet would:
    a ConfigMap or a Secret (from `secrets`, by Secret name) key by key, an emptyDir empty.
    Returns {mountPath: local directory}. Fails on subPath mounts and on unknown volume types."""
    pod = find(objects, "Deployment")["spec"]["template"]["spec"]
    volumes = {volume["name"]: volume for volume in pod["volumes"]}
    config_maps = {o["metadata"]["name"]: o for o in objects if o["kind"] == "ConfigMap"}
    local_dirs: dict[str, Path] = {}
    for mount in daemon_container(objects)["volumeMounts"]:
        assert "subPath" not in mount and "subPathExpr" not in mount, mount
        volume = volumes[mount["name"]]
        local = root / mount["name"]
        local.mkdir(parents=True)
        if "configMap" in volume:
            data = {k: v.encode() for k, v in config_maps[volume["configMap"]["name"]]["data"].items()}
        elif "secret" in volume:
            data = secrets[volume["secret"]["secretName"]]
        elif "emptyDir" in volume:
            data = {}
        else:
            pytest.fail(f"no local stand-in for volume {volume}")
        for key, content in data.items():
            (local / key).write_bytes(content)
        local_dirs[mount["mountPath"]] = local
    return local_dirs


LISTEN_FLAGS = ("--listen", "--metrics-listen", "--health-listen")


def localize_args(args: Sequence[str], local_dirs: dict[str, Path]) -> list[str]:
    """The container's args with every listen address moved to 127.0.0.1:0 (the daemon logs the
    ports it got) and every in-container path moved to its mount's local directory. Fails on a
    path that is inside no mount: on the read-only root filesystem it could be neither read nor
    written."""
    localized: list[str] = []
    for index, arg in enumerate(args):
        if index and args[index - 1] in LISTEN_FLAGS:
            localized.append("127.0.0.1:0")
        elif arg.startswith("/"):
            owners = [m for m in local_dirs if arg.startswith(m.rstrip("/") + "/")]
            assert owners, f"{args[index - 1]} {arg} is not inside any volume mount"
            mount = max(owners, key=len)
            localized.append(str(local_dirs[mount] / arg[len(mount):].lstrip("/")))
        else:
            localized.append(arg)
    return localized


def listening_line(log: Path, process: subprocess.Popen[Any]) -> dict[str, Any] | None:
    """The daemon's JSON "listening" log line (with the ports it bound), once it is written."""
    if process.poll() is not None:
        pytest.fail(f"daemon exited {process.returncode}:\n{log.read_text()}", pytrace=False)
    for line in log.read_text().splitlines():
        if line.startswith("{"):
            record = json.loads(line)
            if record.get("msg") == "listening":
                return record
    return None
