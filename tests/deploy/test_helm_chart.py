"""The Helm chart: lint, schema, Kubernetes validation, and the contract of what it renders."""
from __future__ import annotations

import json
import re
import subprocess
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import grpc
import pytest
import yaml
from grpc_health.v1 import health_pb2, health_pb2_grpc
from loopwarden.v1 import loopwarden_pb2 as pb
from loopwarden.v1 import loopwarden_pb2_grpc as pb_grpc

from loopwarden_server.settings import parse_serve_args
from tables.gen.source import camel
from tables.gen.source import load as load_tables
from tests.deploy.tooling import (
    ALERTS,
    ALL_OPTIONAL_VALUES,
    CHART,
    CRD_MODELS,
    DASHBOARD,
    DEFAULT_VALUES,
    INSTALL_HINT,
    REPO,
    daemon_container,
    find,
    flag_values,
    helm_template,
    http_get,
    kinds,
    listening_line,
    localize_args,
    make_certificates,
    materialize_mounts,
    render,
    run,
    stop,
    tool,
    values,
    venv_script,
    wait_for,
)

VALUES_FILES = {"default values": (), "all optional objects on": (ALL_OPTIONAL_VALUES,)}
OPTIONAL_KINDS = {"HorizontalPodAutoscaler", "NetworkPolicy", "PrometheusRule", "ServiceMonitor"}
CRD_KINDS = {"PrometheusRule", "ServiceMonitor"}
CHART_KUBE_MINIMUM = "1.27.0"
# The agent-hook port of `make serve` and loopwarden-hook's default URL.
HOOKS_PORT = 50052


def lint(*values_files: Path, sets: tuple[str, ...] = (), set_json: tuple[str, ...] = ()) -> subprocess.CompletedProcess[str]:
    argv = [tool("helm"), "lint", "--strict", str(CHART), "--values", str(DEFAULT_VALUES)]
    for path in values_files:
        argv += ["--values", str(path)]
    for item in sets:
        argv += ["--set", item]
    for item in set_json:
        argv += ["--set-json", item]
    return run(argv, check=False)


class TestLint:
    @pytest.mark.parametrize("values_files", VALUES_FILES.values(), ids=VALUES_FILES.keys())
    def test_lint_strict_passes(self, values_files: tuple[Path, ...]) -> None:
        """`helm lint --strict` passes on the default values and with every optional object on."""
        result = lint(*values_files)
        assert result.returncode == 0, result.stdout + result.stderr
        assert "[WARNING]" not in result.stdout and "[ERROR]" not in result.stdout, result.stdout

    def test_all_optional_values_turn_every_optional_object_on(self) -> None:
        """The all-on values file really renders every optional object, headless Service included."""
        objects = render(ALL_OPTIONAL_VALUES)
        assert OPTIONAL_KINDS <= set(kinds(objects))
        assert find(objects, "Service", "-headless")["spec"]["clusterIP"] == "None"
        assert find(objects, "Deployment")["spec"]["template"]["metadata"]["annotations"]["checksum/config"]

    def test_defaults_render_no_optional_object(self) -> None:
        """Defaults: no CRD objects (a cluster without prometheus-operator installs cleanly), no HPA or policy."""
        objects = render()
        assert not OPTIONAL_KINDS & set(kinds(objects))
        assert kinds(objects) == sorted(
            ["ConfigMap", "ConfigMap", "Deployment", "PodDisruptionBudget", "Pod", "Service", "ServiceAccount"]
        )


class TestImage:
    def test_the_bare_defaults_render_with_the_image_a_local_build_produces(self) -> None:
        """`helm template lw helm/loopwarden`, no values file and no --set at all, renders; its
        image is the one `docker build -f server/Dockerfile -t loopwarden:<appVersion> .` tags,
        and the chart README and values.yaml give that command."""
        app_version = yaml.safe_load((CHART / "Chart.yaml").read_text())["appVersion"]
        result = run([tool("helm"), "template", "lw", str(CHART)], check=False)
        assert result.returncode == 0, result.stderr
        objects = [doc for doc in yaml.safe_load_all(result.stdout) if doc]
        assert daemon_container(objects)["image"] == f"loopwarden:{app_version}"
        build = f"docker build -f server/Dockerfile -t loopwarden:{app_version} ."
        assert build in (CHART / "README.md").read_text()
        assert "docker build -f server/Dockerfile -t loopwarden:0.1.0 ." in (CHART / "values.yaml").read_text()

    def test_the_bare_defaults_give_every_port_its_own_number(self) -> None:
        """The chart's gRPC, metrics and health ports differ from each other and from the agent-hook
        port `make serve` and loopwarden-hook use (50052): one number, one listener, everywhere."""
        daemon = values()["daemon"]
        ports = [daemon["grpcPort"], daemon["metricsPort"], daemon["healthPort"], HOOKS_PORT]
        assert len(set(ports)) == len(ports), ports
        assert f"HOOKS_PORT ?= {HOOKS_PORT}" in (REPO / "Makefile").read_text()

    def test_an_empty_repository_fails_saying_how_to_build_one(self) -> None:
        """`helm install` and `helm template` with image.repository set empty stop with the docker
        build command and the values to set. (`helm lint` only logs a template's `fail`, by design.)"""
        sets = ("image.repository=",)
        installed = run([tool("helm"), "install", "lw", str(CHART), "--namespace", "agents", "--dry-run=client",
                         "--set", sets[0]], check=False)
        rendered = helm_template(sets=sets, check=False)
        for result in (installed, rendered):
            output = result.stdout + result.stderr
            assert result.returncode != 0, output
            assert "image.repository is empty" in output
            assert "docker build -f server/Dockerfile -t loopwarden:0.1.0 ." in output
            assert "--set image.repository=REGISTRY/loopwarden" in output

    @pytest.mark.parametrize("values_files", VALUES_FILES.values(), ids=VALUES_FILES.keys())
    def test_the_ci_values_files_name_an_image(self, values_files: tuple[Path, ...]) -> None:
        """Both ci/ files render an image of their own repository (a digest in the all-on file)."""
        image = daemon_container(render(*values_files))["image"]
        assert re.fullmatch(r"registry\.example\.com/[a-z/]*loopwarden(:0\.1\.0|@sha256:[0-9a-f]{64})", image), image


class TestValuesSchema:
    def test_schema_is_valid_json_schema(self) -> None:
        """values.schema.json is itself a valid draft-07 schema and accepts both values files."""
        import jsonschema

        schema = json.loads((CHART / "values.schema.json").read_text())
        jsonschema.Draft7Validator.check_schema(schema)
        jsonschema.Draft7Validator(schema).validate(values())
        merged = _deep_merge(values(), yaml.safe_load(ALL_OPTIONAL_VALUES.read_text()))
        jsonschema.Draft7Validator(schema).validate(merged)

    @pytest.mark.parametrize(
        ("set_json", "complaint"),
        [
            ('replicaCount="two"', "/replicaCount"),
            ('image.pullPolicy="Sometimes"', "/image/pullPolicy"),
            ("service.grpcPort=70000", "/service/grpcPort"),
            ("config.tools.loopDetection.warningThreshold=0", "/config/tools/loopDetection/warningThreshold"),
            ("config.tools.loopDetection.historySize=5000", "/config/tools/loopDetection/historySize"),
            ("config.tools.loopDetection.warningTreshold=5", "warningTreshold"),
            ('config.tools.loopDetection.enabled="yes"', "/config/tools/loopDetection/enabled"),
            ('config.agents.list=[{"tools":{}}]', "/config/agents/list/0"),
            ("serviceMonitor.enable=true", "enable"),
            ('prometheusRule.disabledAlerts=["NoSuchAlert"]', "/prometheusRule/disabledAlerts/0"),
            ('security.tls.clientCA="yes"', "/security/tls/clientCA"),
            ('security.tls.secretName="Not_A_Secret"', "/security/tls/secretName"),
            ("security.tls.secretName=true", "/security/tls/secretName"),
            ('security.authToken.key=""', "/security/authToken/key"),
            ('security.authToken.key="a/b"', "/security/authToken/key"),
            ('security.authToken.secret="t"', "additional properties 'secret'"),
            ('daemon.healthPort="x"', "/daemon/healthPort"),
            ("daemon.healthPort=0", "/daemon/healthPort"),
            ("daemon.limits.maxStreams=-1", "/daemon/limits/maxStreams"),
            ("daemon.limits.maxJsonDepth=2.5", "/daemon/limits/maxJsonDepth"),
            ('daemon.limits.maxMessageBytes="8Mi"', "/daemon/limits/maxMessageBytes"),
            ("daemon.limits.maxRunIdChar=10", "additional properties 'maxRunIdChar'"),
            ('daemon.limits.streamIdleTimeoutSeconds="10m"', "/daemon/limits/streamIdleTimeoutSeconds"),
            ('snapshot.enabled="true"', "/snapshot/enabled"),
            ('snapshot.sizeLimit="lots"', "/snapshot/sizeLimit"),
            ('updateStrategy="BlueGreen"', "/updateStrategy"),
            ('replicaSpread.podAntiAffinity="always"', "/replicaSpread/podAntiAffinity"),
            ('otlp.endpoint="otel-collector"', "/otlp/endpoint"),
            ('otlp.endpoint="http://otel-collector/v1/traces"', "/otlp/endpoint"),
            ("networkPolicy.dns.ports=[]", "/networkPolicy/dns/ports"),
            ('otlp.url="http://x:4317"', "additional properties 'url'"),
        ],
    )
    def test_schema_rejects_bad_values(self, set_json: str, complaint: str) -> None:
        """A wrong type, an out-of-range number or a misspelt key fails lint and template, naming the value."""
        linted = lint(set_json=(set_json,))
        assert linted.returncode != 0, linted.stdout
        assert complaint in linted.stdout + linted.stderr
        rendered = helm_template(set_json=(set_json,), check=False)
        assert rendered.returncode != 0
        assert complaint in rendered.stderr

    def test_replica_count_string_is_rejected(self) -> None:
        """The issue's own example: replicaCount "two" is refused as a string where an integer belongs."""
        result = lint(sets=("replicaCount=two",))
        assert result.returncode != 0
        assert re.search(r"/replicaCount.*got string, want integer", result.stdout), result.stdout

    @pytest.mark.parametrize(
        ("set_json", "complaint"),
        [
            (("security.tls.clientCA=true",), "security.tls.clientCA needs security.tls.secretName"),
            (('security.authToken.secretName="t"', "daemon.healthPort=50051"), "daemon.healthPort (50051) must differ"),
            (('security.tls.secretName="t"', "daemon.healthPort=9464"), "daemon.healthPort (9464) must differ"),
        ],
        ids=["client CA without TLS", "health port on the gRPC port", "health port on the metrics port"],
    )
    def test_inconsistent_security_values_fail_to_render(self, set_json: tuple[str, ...], complaint: str) -> None:
        """Combinations the schema cannot express fail rendering with a message naming the values."""
        result = helm_template(set_json=set_json, check=False)
        assert result.returncode != 0
        assert complaint in result.stderr

    def test_health_port_may_equal_the_grpc_port_while_unused(self) -> None:
        """With neither TLS nor a token, daemon.healthPort is not rendered, so it cannot clash."""
        assert helm_template(set_json=("daemon.healthPort=50051",)).returncode == 0

    def test_termination_grace_must_exceed_drain_grace(self) -> None:
        """Rendering fails when Kubernetes would kill the daemon before its drain grace is over."""
        result = helm_template(set_json=("daemon.drainGraceSeconds=30", "terminationGracePeriodSeconds=30"), check=False)
        assert result.returncode != 0
        assert "must be greater than daemon.drainGraceSeconds" in result.stderr


class TestKubernetesSchemas:
    @pytest.mark.parametrize("values_files", VALUES_FILES.values(), ids=VALUES_FILES.keys())
    @pytest.mark.parametrize("kube_version", [CHART_KUBE_MINIMUM, "latest"])
    def test_rendered_objects_validate(self, values_files: tuple[Path, ...], kube_version: str) -> None:
        """Every rendered built-in object validates strictly (no unknown fields) against the
        Kubernetes OpenAPI schemas of the oldest supported and the newest known version."""
        import kubernetes_validate
        from kubernetes_validate.utils import latest_version

        version = latest_version() if kube_version == "latest" else kube_version
        objects = render(*values_files, kube_version=version)
        checked = []
        for obj in objects:
            if obj["kind"] in CRD_KINDS:
                continue
            try:
                kubernetes_validate.validate(obj, version, strict=True)
            except kubernetes_validate.ValidationError as exc:
                path = ".".join(str(p) for p in exc.path)
                pytest.fail(f"{obj['kind']}/{obj['metadata']['name']} invalid for Kubernetes {version}: {path}: {exc.message}")
            checked.append(obj["kind"])
        assert "Deployment" in checked and "Pod" in checked

    def test_chart_refuses_kubernetes_older_than_grpc_probes(self) -> None:
        """kubeVersion in Chart.yaml stops installs on clusters without native gRPC probes."""
        result = helm_template(kube_version="1.26.0", check=False)
        assert result.returncode != 0
        assert "kubeVersion" in result.stderr or "incompatible" in result.stderr

    def test_prometheus_operator_objects_validate(self) -> None:
        """ServiceMonitor and PrometheusRule validate against the prometheus-operator CRD schemas."""
        if not (CRD_MODELS / "@kubernetes-models" / "prometheus-operator").is_dir():
            pytest.fail(f"prometheus-operator CRD schemas are not installed: {INSTALL_HINT}", pytrace=False)
        objects = [o for o in render(ALL_OPTIONAL_VALUES) if o["kind"] in CRD_KINDS]
        assert sorted(o["kind"] for o in objects) == sorted(CRD_KINDS)
        result = run(
            [tool("node"), str(Path(__file__).with_name("validate_crds.mjs")), str(CRD_MODELS)],
            input=json.dumps(objects),
            check=False,
        )
        assert result.returncode == 0, result.stdout + result.stderr
        assert result.stdout.count("OK ") == len(objects)

    def test_crd_validation_catches_a_bad_object(self) -> None:
        """The CRD check is not a rubber stamp: a ServiceMonitor with a numeric port name fails."""
        bad = {
            "apiVersion": "monitoring.coreos.com/v1",
            "kind": "ServiceMonitor",
            "metadata": {"name": "bad"},
            "spec": {"selector": {}, "endpoints": [{"port": 9464}]},
        }
        result = run(
            [tool("node"), str(Path(__file__).with_name("validate_crds.mjs")), str(CRD_MODELS)],
            input=json.dumps([bad]),
            check=False,
        )
        assert result.returncode == 1
        assert "port must be string" in result.stdout


class TestDeployment:
    def test_native_grpc_probes_on_the_health_service(self) -> None:
        """Startup, readiness and liveness are native gRPC probes; readiness asks for the API service,
        which turns NOT_SERVING while the daemon drains."""
        container = daemon_container(render())
        port = values()["daemon"]["grpcPort"]
        for probe in ("startupProbe", "readinessProbe", "livenessProbe"):
            assert container[probe]["grpc"]["port"] == port, probe
        assert container["readinessProbe"]["grpc"]["service"] == "loopwarden.v1.LoopDetectionService"
        assert container["livenessProbe"]["grpc"]["service"] == ""

    def test_security_context(self) -> None:
        """Non-root, read-only root filesystem, all capabilities dropped, RuntimeDefault seccomp."""
        objects = render()
        pod = find(objects, "Deployment")["spec"]["template"]["spec"]
        container = daemon_container(objects)
        assert pod["securityContext"]["runAsNonRoot"] is True
        assert pod["securityContext"]["seccompProfile"] == {"type": "RuntimeDefault"}
        security = container["securityContext"]
        assert security["runAsNonRoot"] is True and security["runAsUser"] != 0
        assert security["readOnlyRootFilesystem"] is True
        assert security["allowPrivilegeEscalation"] is False
        assert security["capabilities"]["drop"] == ["ALL"]
        assert security["seccompProfile"] == {"type": "RuntimeDefault"}
        assert pod["automountServiceAccountToken"] is False

    @pytest.mark.parametrize("values_files", VALUES_FILES.values(), ids=VALUES_FILES.keys())
    def test_termination_grace_exceeds_drain_grace(self, values_files: tuple[Path, ...]) -> None:
        """terminationGracePeriodSeconds is longer than the --drain-grace the daemon is given."""
        objects = render(*values_files)
        pod = find(objects, "Deployment")["spec"]["template"]["spec"]
        drain = float(flag_values(daemon_container(objects)["args"])["--drain-grace"])
        assert pod["terminationGracePeriodSeconds"] > drain

    def test_resources_and_single_replica_default(self) -> None:
        objects = render()
        deployment = find(objects, "Deployment")
        assert deployment["spec"]["replicas"] == 1
        resources = daemon_container(objects)["resources"]
        assert resources["requests"]["cpu"] and resources["requests"]["memory"] and resources["limits"]["memory"]

    def test_update_strategy(self) -> None:
        """RollingUpdate (surge first) by default; Recreate on request, so a snapshot on a PVC carries runs across upgrades."""
        rolling = find(render(), "Deployment")["spec"]["strategy"]
        recreate = find(render(set_json=('updateStrategy="Recreate"',)), "Deployment")["spec"]["strategy"]
        assert {"type": "RollingUpdate", "rollingUpdate": {"maxSurge": 1, "maxUnavailable": 0}} == rolling
        assert {"type": "Recreate"} == recreate

    def test_hpa_owns_replicas_when_enabled(self) -> None:
        """With autoscaling on, the Deployment leaves replicas to the HPA, which targets it."""
        objects = render(ALL_OPTIONAL_VALUES)
        deployment = find(objects, "Deployment")
        assert "replicas" not in deployment["spec"]
        hpa = find(objects, "HorizontalPodAutoscaler")
        assert hpa["spec"]["scaleTargetRef"] == {"apiVersion": "apps/v1", "kind": "Deployment", "name": deployment["metadata"]["name"]}


# TLS with mTLS, a token, the snapshot and six limits on, over the defaults.
SECURE_SETS = (
    'security.tls.secretName="lw-tls"',
    "security.tls.clientCA=true",
    'security.authToken.secretName="lw-token"',
    "snapshot.enabled=true",
    "daemon.limits.maxJsonDepth=32",
    "daemon.limits.maxEventsPerRequest=500",
    "daemon.limits.maxMessageBytes=16777216",
    "daemon.limits.maxStreams=2000",
    "daemon.limits.maxParamsBytes=524288",
    "daemon.limits.maxResultBytes=2097152",
)
DEFAULT_ARGS = [
    "--listen", "0.0.0.0:50051",
    "--metrics-listen", "0.0.0.0:9464",
    "--config", "/etc/loopwarden/loopwarden.json5",
    "--drain-grace", "10",
    "--log-level", "info",
]
SECURE_ARGS = [
    "--listen", "0.0.0.0:50051",
    "--metrics-listen", "0.0.0.0:9464",
    "--config", "/etc/loopwarden/loopwarden.json5",
    "--drain-grace", "10",
    # In the order of tables/loopwarden.toml's [[limit]] rows, which the chart's flag map follows.
    "--max-params-bytes", "524288",
    "--max-result-bytes", "2097152",
    "--max-json-depth", "32",
    "--max-events-per-request", "500",
    "--max-message-bytes", "16777216",
    "--max-streams", "2000",
    "--health-listen", "0.0.0.0:50053",
    "--tls-cert", "/etc/loopwarden-tls/tls.crt",
    "--tls-key", "/etc/loopwarden-tls/tls.key",
    "--tls-client-ca", "/etc/loopwarden-tls/ca.crt",
    "--auth-token-file", "/etc/loopwarden-auth/token",
    "--snapshot", "/var/lib/loopwarden/runs.snapshot",
    "--log-level", "info",
]
PROBES = ("startupProbe", "readinessProbe", "livenessProbe")
# Every daemon limit as its chart key and flag, from the one table the chart's copies come from.
LIMIT_FLAGS = [(camel(limit.name), limit.flag, limit.name) for limit in load_tables(REPO).limits]


class TestSecurityAndSnapshot:
    @pytest.mark.parametrize(
        "set_json",
        [(), ("snapshot.enabled=true",), ("daemon.limits.maxStreams=5",), ('security.tls.secretName=""', "daemon.healthPort=6000")],
        ids=["defaults", "snapshot only", "a limit only", "TLS and token off, health port set"],
    )
    def test_without_tls_or_token_probes_stay_on_the_grpc_port(self, set_json: tuple[str, ...]) -> None:
        """Neither TLS nor a token: no health-only port anywhere; probes and the helm test pod use
        the gRPC port, as before these options existed."""
        objects = render(set_json=(*set_json, "networkPolicy.enabled=true"))
        container = daemon_container(objects)
        grpc_port = values()["daemon"]["grpcPort"]
        assert "--health-listen" not in container["args"]
        assert not {"--tls-cert", "--tls-key", "--tls-client-ca", "--auth-token-file"} & set(container["args"])
        for probe in PROBES:
            assert container[probe]["grpc"]["port"] == grpc_port, probe
        assert [p["name"] for p in container["ports"]] == ["grpc", "http-metrics"]
        service = find(objects, "Service", "loopwarden")
        assert [p["name"] for p in service["spec"]["ports"]] == ["grpc", "http-metrics"]
        address = flag_values(find(objects, "Pod")["spec"]["containers"][0]["command"][2:])["--address"]
        assert address == f"{service['metadata']['name']}.agents.svc:{values()['service']['grpcPort']}"
        grpc_rule = find(objects, "NetworkPolicy")["spec"]["ingress"][0]
        assert grpc_rule["ports"] == [{"port": "grpc", "protocol": "TCP"}]

    def test_defaults_render_todays_deployment(self) -> None:
        """Everything off: the exact argument vector, ports and volumes of the chart before TLS,
        tokens, snapshots and limits were values."""
        objects = render()
        container = daemon_container(objects)
        assert container["args"] == DEFAULT_ARGS
        assert [m["name"] for m in container["volumeMounts"]] == ["config", "tmp"]
        pod = find(objects, "Deployment")["spec"]["template"]["spec"]
        assert [v["name"] for v in pod["volumes"]] == ["config", "tmp"]

    def test_everything_on_renders_exactly_these_args(self) -> None:
        """TLS + mTLS + token + snapshot + limits: the flags and paths, in order, large numbers as
        plain integers (never 1.6777216e+07)."""
        assert daemon_container(render(set_json=SECURE_SETS))["args"] == SECURE_ARGS

    def test_secrets_and_snapshot_are_directory_mounts(self) -> None:
        """The TLS and token Secrets are read-only directory mounts (no subPath, so a rotated Secret
        reaches the files), the snapshot directory is a writable emptyDir, no mount sits inside
        another (nothing is nested in the ConfigMap's read-only volume), and each file flag names a
        key of the volume mounted at its directory."""
        objects = render(set_json=SECURE_SETS)
        container = daemon_container(objects)
        assert container["volumeMounts"] == [
            {"name": "config", "mountPath": "/etc/loopwarden", "readOnly": True},
            {"name": "tmp", "mountPath": "/tmp"},
            {"name": "tls", "mountPath": "/etc/loopwarden-tls", "readOnly": True},
            {"name": "auth-token", "mountPath": "/etc/loopwarden-auth", "readOnly": True},
            {"name": "snapshot", "mountPath": "/var/lib/loopwarden"},
        ]
        pod = find(objects, "Deployment")["spec"]["template"]["spec"]
        volumes = {v["name"]: v for v in pod["volumes"]}
        assert volumes["tls"] == {"name": "tls", "secret": {"secretName": "lw-tls"}}
        assert volumes["auth-token"] == {"name": "auth-token", "secret": {"secretName": "lw-token"}}
        assert volumes["snapshot"] == {"name": "snapshot", "emptyDir": {"sizeLimit": values()["snapshot"]["sizeLimit"]}}
        paths = [m["mountPath"] for m in container["volumeMounts"]]
        assert not [(a, b) for a in paths for b in paths if b.startswith(a.rstrip("/") + "/")]

        mounted = {m["mountPath"]: volumes[m["name"]] for m in container["volumeMounts"]}
        flags = flag_values(container["args"])
        expected = {"--tls-cert": ("tls", "tls.crt"), "--tls-key": ("tls", "tls.key"),
                    "--tls-client-ca": ("tls", "ca.crt"), "--auth-token-file": ("auth-token", "token"),
                    "--snapshot": ("snapshot", "runs.snapshot")}
        for flag, (volume, key) in expected.items():
            directory, name = flags[flag].rsplit("/", 1)
            assert mounted[directory]["name"] == volume and name == key, flag
        assert flags["--auth-token-file"].endswith("/" + values()["security"]["authToken"]["key"])

    @pytest.mark.parametrize(
        ("set_json", "security_flags"),
        [
            (('security.tls.secretName="lw-tls"',), {"--tls-cert", "--tls-key"}),
            (('security.tls.secretName="lw-tls"', "security.tls.clientCA=true"), {"--tls-cert", "--tls-key", "--tls-client-ca"}),
            (('security.authToken.secretName="lw-token"', 'security.authToken.key="bearer"'), {"--auth-token-file"}),
            (SECURE_SETS, {"--tls-cert", "--tls-key", "--tls-client-ca", "--auth-token-file"}),
        ],
        ids=["TLS", "mTLS", "token", "mTLS and token"],
    )
    def test_tls_or_token_moves_probes_and_helm_test_to_the_health_port(
        self, set_json: tuple[str, ...], security_flags: set[str]
    ) -> None:
        """TLS or a token: a named plaintext health port is served, the three probes and the helm
        test pod (through a Service port that targets it) ask it, and the NetworkPolicy admits the
        gRPC clients, the test pod among them, to it."""
        health_port = 6000
        objects = render(set_json=(*set_json, f"daemon.healthPort={health_port}", "networkPolicy.enabled=true"))
        container = daemon_container(objects)
        flags = flag_values(container["args"])
        assert security_flags == {f for f in flags if f.startswith(("--tls-", "--auth-"))}
        assert flags["--health-listen"] == f"0.0.0.0:{health_port}"
        assert {"name": "grpc-health", "containerPort": health_port, "protocol": "TCP"} in container["ports"]
        for probe in PROBES:
            assert container[probe]["grpc"]["port"] == health_port, probe
        assert container["readinessProbe"]["grpc"]["service"] == "loopwarden.v1.LoopDetectionService"

        service = find(objects, "Service", "loopwarden")
        (health,) = [p for p in service["spec"]["ports"] if p["name"] == "grpc-health"]
        assert health == {"name": "grpc-health", "port": health_port, "targetPort": "grpc-health",
                          "protocol": "TCP", "appProtocol": "grpc"}

        test_pod = find(objects, "Pod")
        host, port = flag_values(test_pod["spec"]["containers"][0]["command"][2:])["--address"].rsplit(":", 1)
        assert host == f"{service['metadata']['name']}.agents.svc"
        assert next(p["targetPort"] for p in service["spec"]["ports"] if p["port"] == int(port)) == "grpc-health"

        grpc_rule = find(objects, "NetworkPolicy")["spec"]["ingress"][0]
        assert {"port": "grpc-health", "protocol": "TCP"} in grpc_rule["ports"]
        peers = [peer["podSelector"]["matchLabels"] for peer in grpc_rule["from"] if "podSelector" in peer]
        assert any(all(test_pod["metadata"]["labels"].get(k) == v for k, v in peer.items()) for peer in peers)

    @pytest.mark.parametrize(("key", "flag", "name"), LIMIT_FLAGS, ids=[key for key, _, _ in LIMIT_FLAGS])
    def test_each_limit_sets_its_flag_and_zero_leaves_it_out(self, key: str, flag: str, name: str) -> None:
        """Every daemon limit (each [[limit]] row of tables/loopwarden.toml) is a value: 0 leaves its
        flag out, a number sets it (a large one as a plain integer), and the daemon's own parser
        reads it as that limit."""
        assert values()["daemon"]["limits"][key] == 0
        default_args = daemon_container(render())["args"]
        assert flag not in default_args
        args = daemon_container(render(set_json=(f"daemon.limits.{key}=123456789",)))["args"]
        assert flag_values(args)[flag] == "123456789"
        assert len(args) == len(default_args) + 2
        assert getattr(parse_serve_args(args, {}).limits, name) == 123456789

    def test_seconds_keep_their_fraction(self) -> None:
        """A limit in seconds may be a fraction: rendered as one, and the daemon takes it."""
        args = daemon_container(render(set_json=("daemon.limits.streamIdleTimeoutSeconds=2.5",)))["args"]
        assert flag_values(args)["--stream-idle-timeout"] == "2.5"
        assert parse_serve_args(args, {}).limits.stream_idle_timeout_seconds == 2.5
        whole = daemon_container(render(set_json=("daemon.limits.streamIdleTimeoutSeconds=1200",)))["args"]
        assert flag_values(whole)["--stream-idle-timeout"] == "1200"

    def test_snapshot_size_limit_is_the_empty_dir_limit(self) -> None:
        pod = find(render(set_json=("snapshot.enabled=true", 'snapshot.sizeLimit="256Mi"')), "Deployment")["spec"]["template"]["spec"]
        (volume,) = [v for v in pod["volumes"] if v["name"] == "snapshot"]
        assert volume["emptyDir"] == {"sizeLimit": "256Mi"}


class TestConfig:
    @pytest.mark.parametrize("values_files", VALUES_FILES.values(), ids=VALUES_FILES.keys())
    def test_config_map_mounted_as_directory_the_daemon_reads(self, values_files: tuple[Path, ...]) -> None:
        """The ConfigMap is mounted as a whole directory (no subPath, so updates reach the file
        watcher) and --config points at its key inside that directory."""
        objects = render(*values_files)
        deployment = find(objects, "Deployment")
        container = daemon_container(objects)
        (mount,) = [m for m in container["volumeMounts"] if m["name"] == "config"]
        assert "subPath" not in mount and "subPathExpr" not in mount
        assert all("subPath" not in m for m in container["volumeMounts"])
        (volume,) = [v for v in deployment["spec"]["template"]["spec"]["volumes"] if v["name"] == "config"]
        config_map = find(objects, "ConfigMap", deployment["metadata"]["name"])
        assert volume["configMap"]["name"] == config_map["metadata"]["name"]
        assert "items" not in volume["configMap"]
        config_path = flag_values(container["args"])["--config"]
        directory, key = config_path.rsplit("/", 1)
        assert mount["mountPath"] == directory == "/etc/loopwarden"
        assert list(config_map["data"]) == [key] == ["loopwarden.json5"]

    @pytest.mark.parametrize("values_files", VALUES_FILES.values(), ids=VALUES_FILES.keys())
    def test_rendered_config_passes_the_daemons_own_check(self, values_files: tuple[Path, ...], tmp_path: Path) -> None:
        """`loopwarden check-config` (the daemon's loader) accepts the rendered config file."""
        objects = render(*values_files)
        text = find(objects, "ConfigMap", find(objects, "Deployment")["metadata"]["name"])["data"]["loopwarden.json5"]
        path = tmp_path / "loopwarden.json5"
        path.write_text(text)
        result = run([venv_script("loopwarden"), "check-config", str(path)], check=False)
        assert result.returncode == 0, result.stdout + result.stderr
        assert result.stdout.startswith("ok:")

    def test_a_preset_named_in_values_is_not_beaten_by_the_charts_defaults(self, tmp_path: Path) -> None:
        """The chart leaves every threshold unset, so `config.loopwarden.preset=fast` reaches the daemon:
        check-config on the rendered file reports the preset's W/C/G, not the reference 10/20/30."""
        objects = render(sets=("config.loopwarden.preset=fast",))
        text = find(objects, "ConfigMap", find(objects, "Deployment")["metadata"]["name"])["data"]["loopwarden.json5"]
        path = tmp_path / "loopwarden.json5"
        path.write_text(text)
        result = run([venv_script("loopwarden"), "check-config", str(path)], check=False)
        assert result.returncode == 0, result.stdout + result.stderr
        assert "enabled=true W=4 C=5 G=8 U=4" in result.stdout and "preset: fast" in result.stdout

    def test_values_reach_the_config_file(self) -> None:
        """Thresholds and agent overrides in values appear as such in the rendered file."""
        objects = render(ALL_OPTIONAL_VALUES)
        text = find(objects, "ConfigMap", find(objects, "Deployment")["metadata"]["name"])["data"]["loopwarden.json5"]
        body = json.loads("\n".join(line for line in text.splitlines() if not line.lstrip().startswith("//")))
        assert body["tools"]["loopDetection"]["warningThreshold"] == 8
        assert [agent["id"] for agent in body["agents"]["list"]] == ["safe-runner", "researcher"]
        assert body["loopwarden"]["providerSendTools"] == ["telegram", "slack"]

    def test_checksum_annotation_is_switchable_and_follows_the_config(self) -> None:
        """Off by default (hot reload); when on, it changes exactly when the config changes."""
        def checksum(*sets: str) -> str | None:
            pod = find(render(sets=sets), "Deployment")["spec"]["template"]
            return (pod["metadata"].get("annotations") or {}).get("checksum/config")

        assert checksum() is None
        first = checksum("rollOnConfigChange=true")
        assert first and re.fullmatch(r"[0-9a-f]{64}", first)
        assert checksum("rollOnConfigChange=true", "replicaCount=3", "state.store=redis",
                        "state.redis.urlSecret.name=lw-redis") == first
        assert checksum("rollOnConfigChange=true", "config.tools.loopDetection.warningThreshold=9") != first


class TestServicesAndPolicies:
    def test_service_ports_are_named_and_target_container_ports(self) -> None:
        objects = render(ALL_OPTIONAL_VALUES)
        health_port = _all_optional()["daemon"]["healthPort"]
        container_ports = {p["name"]: p["containerPort"] for p in daemon_container(objects)["ports"]}
        assert container_ports == {
            "grpc": values()["daemon"]["grpcPort"],
            "http-metrics": values()["daemon"]["metricsPort"],
            "grpc-health": health_port,
        }
        service = find(objects, "Service", "loopwarden")
        assert {p["name"]: p["targetPort"] for p in service["spec"]["ports"]} == {
            "grpc": "grpc", "http-metrics": "http-metrics", "grpc-health": "grpc-health"}
        assert {p["name"]: p["port"] for p in service["spec"]["ports"]} == {
            "grpc": values()["service"]["grpcPort"],
            "http-metrics": values()["service"]["metricsPort"],
            "grpc-health": health_port,
        }
        headless = find(objects, "Service", "-headless")
        assert [p["targetPort"] for p in headless["spec"]["ports"]] == ["grpc"]

    def test_selectors_match_the_pods(self) -> None:
        """Services, PDB, NetworkPolicy and ServiceMonitor all select the daemon's pod labels."""
        objects = render(ALL_OPTIONAL_VALUES)
        pod_labels = find(objects, "Deployment")["spec"]["template"]["metadata"]["labels"]

        def selects(selector: dict[str, str], labels: dict[str, str]) -> bool:
            return bool(selector) and all(labels.get(k) == v for k, v in selector.items())

        for service in (o for o in objects if o["kind"] == "Service"):
            assert selects(service["spec"]["selector"], pod_labels), service["metadata"]["name"]
        assert selects(find(objects, "PodDisruptionBudget")["spec"]["selector"]["matchLabels"], pod_labels)
        assert selects(find(objects, "NetworkPolicy")["spec"]["podSelector"]["matchLabels"], pod_labels)
        service = find(objects, "Service", "loopwarden")
        monitor = find(objects, "ServiceMonitor")
        assert selects(monitor["spec"]["selector"]["matchLabels"], service["metadata"]["labels"])
        assert monitor["spec"]["endpoints"][0]["port"] in {p["name"] for p in service["spec"]["ports"]}
        # The job label the alerts select on comes from this Service label.
        assert service["metadata"]["labels"][monitor["spec"]["jobLabel"]] == "loopwarden"

    def test_network_policy_admits_the_test_pod_and_the_scrapers(self) -> None:
        objects = render(ALL_OPTIONAL_VALUES)
        policy = find(objects, "NetworkPolicy")
        test_pod = find(objects, "Pod")
        grpc_rule, metrics_rule = policy["spec"]["ingress"]
        # TLS and a token are on in this file: the plaintext health port is admitted with the API.
        assert grpc_rule["ports"] == [{"port": "grpc", "protocol": "TCP"}, {"port": "grpc-health", "protocol": "TCP"}]
        client_selectors = [peer["podSelector"]["matchLabels"] for peer in grpc_rule["from"] if "podSelector" in peer]
        assert any(all(test_pod["metadata"]["labels"].get(k) == v for k, v in s.items()) for s in client_selectors)
        assert metrics_rule["ports"] == [{"port": "http-metrics", "protocol": "TCP"}]
        assert metrics_rule["from"] == yaml.safe_load(ALL_OPTIONAL_VALUES.read_text())["networkPolicy"]["metricsFrom"]


class TestObservabilityObjects:
    def test_dashboard_config_map_is_labelled_for_the_sidecar(self) -> None:
        """Default label grafana_dashboard: "1"; the data is the dashboard file byte for byte."""
        config_map = find(render(), "ConfigMap", "-dashboard")
        assert config_map["metadata"]["labels"]["grafana_dashboard"] == "1"
        assert config_map["data"]["loopwarden-dashboard.json"] == DASHBOARD.read_text().rstrip("\n")

    def test_dashboard_label_is_configurable(self) -> None:
        config_map = find(
            render(sets=("dashboards.label=my_dashboards", "dashboards.labelValue=yes", "dashboards.namespace=monitoring")),
            "ConfigMap",
            "-dashboard",
        )
        assert config_map["metadata"]["labels"]["my_dashboards"] == "yes"
        assert "grafana_dashboard" not in config_map["metadata"]["labels"]
        assert config_map["metadata"]["namespace"] == "monitoring"
        assert find(render(sets=("dashboards.enabled=false",)), "ConfigMap", "lw-loopwarden")  # only the config left

    def test_prometheus_rule_carries_the_rule_file(self) -> None:
        """The PrometheusRule holds exactly the alerts of files/loopwarden-alerts.yaml."""
        rule = find(render(sets=("prometheusRule.enabled=true",)), "PrometheusRule")
        assert rule["spec"]["groups"] == yaml.safe_load(ALERTS.read_text())["groups"]

    def test_prometheus_rule_follows_name_override_and_options(self) -> None:
        """nameOverride rewrites job selectors; disabled alerts go; extra labels and groups come."""
        rule = find(render(ALL_OPTIONAL_VALUES, sets=("nameOverride=warden",)), "PrometheusRule")
        alerts = [r for g in rule["spec"]["groups"] for r in g["rules"] if "alert" in r]
        assert "LoopwardenAbsent" not in {a["alert"] for a in alerts}
        assert all(a["labels"]["team"] == "agents" and a["labels"]["severity"] for a in alerts)
        assert all('job="warden"' in a["expr"] and 'job="loopwarden"' not in a["expr"] for a in alerts)
        assert rule["spec"]["groups"][-1]["name"] == "loopwarden.custom"
        monitor = find(render(ALL_OPTIONAL_VALUES, sets=("nameOverride=warden",)), "ServiceMonitor")
        service = find(render(ALL_OPTIONAL_VALUES, sets=("nameOverride=warden",)), "Service", "warden")
        assert service["metadata"]["labels"][monitor["spec"]["jobLabel"]] == "warden"

    def test_rendered_prometheus_rule_passes_promtool(self, tmp_path: Path) -> None:
        """The rules as rendered into the PrometheusRule (with all options applied) pass promtool."""
        rule = find(render(ALL_OPTIONAL_VALUES), "PrometheusRule")
        path = tmp_path / "rendered-rules.yaml"
        path.write_text(yaml.safe_dump({"groups": rule["spec"]["groups"]}))
        run([tool("promtool"), "check", "rules", str(path)])


class TestHelmTestHook:
    def test_hook_pod_checks_grpc_health_of_the_service(self) -> None:
        """`helm test` runs `loopwarden health` from the daemon image against the Service's gRPC port."""
        objects = render()
        pod = find(objects, "Pod")
        service = find(objects, "Service", "loopwarden")
        assert pod["metadata"]["annotations"]["helm.sh/hook"] == "test"
        (container,) = pod["spec"]["containers"]
        assert container["image"] == daemon_container(objects)["image"]
        assert container["command"][:2] == ["loopwarden", "health"]
        flags = flag_values(container["command"][2:])
        host, port = flags["--address"].rsplit(":", 1)
        assert host == f"{service['metadata']['name']}.agents.svc"
        assert int(port) == next(p["port"] for p in service["spec"]["ports"] if p["name"] == "grpc")
        assert flags["--service"] == "loopwarden.v1.LoopDetectionService"
        assert pod["spec"]["restartPolicy"] == "Never"
        assert container["securityContext"]["readOnlyRootFilesystem"] is True

    @pytest.mark.parametrize("values_files", VALUES_FILES.values(), ids=VALUES_FILES.keys())
    def test_notes_tell_how_to_reach_and_test_the_release(self, values_files: tuple[Path, ...]) -> None:
        argv = [tool("helm"), "install", "lw", str(CHART), "--namespace", "agents", "--dry-run=client",
                "--values", str(DEFAULT_VALUES)]
        for path in values_files:
            argv += ["--values", str(path)]
        notes = run(argv).stdout.split("NOTES:", 1)[1]
        assert "lw-loopwarden.agents.svc:50051" in notes
        assert "helm test lw -n agents" in notes
        assert ("more than one replica" in notes) == bool(values_files)


TOKEN = "chart-test-token-6f1c2a"


@pytest.fixture(scope="module")
def certs(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return make_certificates(tmp_path_factory.mktemp("certs"))


@dataclass
class ChartDaemon:
    process: subprocess.Popen[Any]
    listening: dict[str, Any]
    local_dirs: dict[str, Path]
    log: Path


@contextmanager
def chart_daemon(objects: list[dict[str, Any]], tmp_path: Path, secrets: dict[str, dict[str, bytes]]) -> Iterator[ChartDaemon]:
    """The real daemon started with the Deployment's exact argument vector, only its listen
    addresses moved to free loopback ports and its in-container paths to local stand-ins of the
    volumes mounted there (rendered ConfigMap, the given Secrets, empty emptyDirs)."""
    local_dirs = materialize_mounts(objects, tmp_path / "mounts", secrets)
    args = localize_args(daemon_container(objects)["args"], local_dirs)
    log_path = tmp_path / "daemon.log"
    log = log_path.open("w")
    # The image's ENTRYPOINT is `loopwarden serve` (test_dockerfile checks that).
    process = subprocess.Popen([venv_script("loopwarden"), "serve", *args], stdout=log, stderr=subprocess.STDOUT, cwd=tmp_path)
    try:
        listening = wait_for("the daemon started with the chart's args to listen",
                             lambda: listening_line(log_path, process), timeout=60, interval=0.2)
        yield ChartDaemon(process, listening, local_dirs, log_path)
    finally:
        stop(process)
        log.close()


def helm_test_command(objects: list[dict[str, Any]], address: str) -> list[str]:
    """The helm test pod's `loopwarden health` command, pointed at a local address."""
    flags = flag_values(find(objects, "Pod")["spec"]["containers"][0]["command"][2:])
    return [venv_script("loopwarden"), "health", "--address", address, "--service", str(flags["--service"]),
            "--timeout", str(flags["--timeout"])]


def probe_address(objects: list[dict[str, Any]], daemon: ChartDaemon) -> str:
    """Where the probes and the helm test pod land: the listener of the container port they name."""
    container = daemon_container(objects)
    ports = {p["containerPort"]: p["name"] for p in container["ports"]}
    probed = {container[probe]["grpc"]["port"] for probe in PROBES}
    assert len(probed) == 1
    name = ports[probed.pop()]
    return daemon.listening["health_address" if name == "grpc-health" else "grpc_address"]


class TestChartAgainstTheRealDaemon:
    def test_default_args_start_a_plaintext_daemon(self, tmp_path: Path) -> None:
        """Defaults: the chart's args start the daemon in plaintext, with no health-only port; the
        helm test command against the probed (gRPC) port reports SERVING and metrics answer."""
        objects = render()
        with chart_daemon(objects, tmp_path, secrets={}) as daemon:
            assert daemon.listening["health_address"] == "" and not daemon.listening["tls"]
            address = probe_address(objects, daemon)
            assert address == daemon.listening["grpc_address"]
            result = run(helm_test_command(objects, address), check=False, timeout=30)
            assert result.returncode == 0 and "SERVING" in result.stdout, result.stdout + result.stderr
            assert "loopwarden_build_info" in http_get(f"http://{daemon.listening['metrics_address']}/metrics").decode()

    @pytest.mark.parametrize("client_ca", [True, False], ids=["mTLS", "TLS"])
    def test_secured_args_serve_health_in_plaintext_and_refuse_plaintext_api(
        self, client_ca: bool, certs: Path, tmp_path: Path
    ) -> None:
        """All optional values (TLS, a token under a custom key, snapshot, limits), with mTLS on or
        off, and certificates made by openssl: the daemon starts; the probed port is the plaintext
        health port and answers SERVING with no credentials; the gRPC port refuses a plaintext
        client, serves a TLS client (with its client certificate under mTLS) holding the token,
        and answers UNAUTHENTICATED without the token; SIGTERM writes the snapshot into the
        snapshot volume."""
        objects = render(ALL_OPTIONAL_VALUES, set_json=(f"security.tls.clientCA={str(client_ca).lower()}",))
        optional = _all_optional()
        secrets = {
            optional["security"]["tls"]["secretName"]: {
                "tls.crt": (certs / "server.pem").read_bytes(),
                "tls.key": (certs / "server.key").read_bytes(),
                "ca.crt": (certs / "ca.pem").read_bytes(),
            },
            optional["security"]["authToken"]["secretName"]: {optional["security"]["authToken"]["key"]: f"{TOKEN}\n".encode()},
        }
        with chart_daemon(objects, tmp_path, secrets) as daemon:
            listening = daemon.listening
            assert (listening["tls"], listening["mtls"], listening["token_auth"]) == (True, client_ca, True)

            health_address = probe_address(objects, daemon)
            assert health_address == listening["health_address"] != listening["grpc_address"]
            serving = run(helm_test_command(objects, health_address), check=False, timeout=30)
            assert serving.returncode == 0 and "SERVING" in serving.stdout, serving.stdout + serving.stderr

            plaintext = run(helm_test_command(objects, listening["grpc_address"]), check=False, timeout=30)
            assert plaintext.returncode != 0, plaintext.stdout
            assert "UNAVAILABLE" in plaintext.stderr, plaintext.stderr

            client_key = (certs / "client.key").read_bytes() if client_ca else None
            client_chain = (certs / "client.pem").read_bytes() if client_ca else None
            credentials = grpc.ssl_channel_credentials((certs / "ca.pem").read_bytes(), client_key, client_chain)
            with grpc.secure_channel(listening["grpc_address"], credentials) as channel:
                health = health_pb2_grpc.HealthStub(channel).Check(health_pb2.HealthCheckRequest(service=""), timeout=10)
                assert health.status == health_pb2.HealthCheckResponse.SERVING
                stub = pb_grpc.LoopDetectionServiceStub(channel)
                request = pb.InspectRunRequest(run_id="no-such-run")
                assert _status(lambda: stub.InspectRun(request, timeout=10)) == grpc.StatusCode.UNAUTHENTICATED
                authorized = (("authorization", f"Bearer {TOKEN}"),)
                assert _status(lambda: stub.InspectRun(request, timeout=10, metadata=authorized)) == grpc.StatusCode.NOT_FOUND

            assert "loopwarden_build_info" in http_get(f"http://{listening['metrics_address']}/metrics").decode()
            # All optional values run several replicas on the Redis store (no snapshot directory).
            stop(daemon.process)
            assert daemon.process.returncode == 0, daemon.log.read_text()


def _status(call: Any) -> grpc.StatusCode:
    with pytest.raises(grpc.RpcError) as failure:
        call()
    return failure.value.code()


class TestDocumentation:
    def test_every_value_is_commented(self) -> None:
        """Each key in values.yaml has a comment on the line above or at its end."""
        uncommented = []
        previous = ""
        for number, line in enumerate((CHART / "values.yaml").read_text().splitlines(), 1):
            if not line.strip():
                continue
            match = re.match(r"^\s*([A-Za-z0-9_.-]+):(.*)$", line)
            if match and "#" not in match.group(2) and not previous.lstrip().startswith("#"):
                uncommented.append(f"{number}: {line.strip()}")
            previous = line
        assert uncommented == []

    def test_readme_lists_every_value(self) -> None:
        readme = (CHART / "README.md").read_text()
        missing = [path for path in _leaf_paths(values()) if f"`{path}`" not in readme]
        assert missing == []

    def test_readme_documents_install_upgrade_and_dashboard_import(self) -> None:
        readme = (CHART / "README.md").read_text()
        headings = set(re.findall(r"^##+ (.+)$", readme, re.MULTILINE))
        assert {"Install", "Upgrade", "Values", "Dashboard", "Alerts and runbooks"} <= headings
        assert "helm install" in readme and "helm upgrade" in readme and "helm test" in readme
        assert "Import" in readme and "grafana_dashboard" in readme

    def test_chart_metadata(self) -> None:
        chart = yaml.safe_load((CHART / "Chart.yaml").read_text())
        assert chart["apiVersion"] == "v2"
        assert chart["kubeVersion"] and chart["appVersion"]
        # The daemon's distribution, server/pyproject.toml (pyproject.toml before the split).
        path = next(p for p in (REPO / "server" / "pyproject.toml", REPO / "pyproject.toml") if p.exists())
        assert f'version = "{chart["appVersion"]}"' in path.read_text(), "appVersion follows the daemon's version"


def _all_optional() -> dict[str, Any]:
    return yaml.safe_load(ALL_OPTIONAL_VALUES.read_text())


def _leaf_paths(tree: Any, prefix: str = "") -> list[str]:
    if isinstance(tree, dict) and tree:
        return [p for key, sub in tree.items() for p in _leaf_paths(sub, f"{prefix}{key}.")]
    return [prefix.rstrip(".")]


def _deep_merge(base: Any, override: Any) -> Any:
    if isinstance(base, dict) and isinstance(override, dict):
        merged = dict(base)
        for key, value in override.items():
            merged[key] = _deep_merge(base.get(key), value) if key in base else value
        return merged
    return override
