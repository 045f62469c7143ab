"""Process settings of the daemon: flags, each with a LOOPWARDEN_* environment fallback.

These are the daemon's own knobs (addresses, limits, timings). The detection config lives in the
JSON5 file (see config/); it is reloadable, these are not.
"""
from __future__ import annotations

import argparse
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, fields
from typing import Any

DEFAULT_LISTEN = "127.0.0.1:50051"
DEFAULT_METRICS_LISTEN = "127.0.0.1:9464"


class SettingsError(ValueError):
    """A flag or environment value is unusable; the message names it."""


@dataclass(frozen=True, slots=True)
class Limits:
    """Input limits; an event over one is rejected with a stable error code."""

    # generated:limits:begin (tables/loopwarden.toml [[limit]]: edit there, then `make tables`)
    max_params_bytes: int = 1024 * 1024
    max_result_bytes: int = 1024 * 1024
    max_run_id_chars: int = 256
    max_tool_name_chars: int = 256
    max_agent_id_chars: int = 256
    max_session_id_chars: int = 256
    max_tool_call_id_chars: int = 256
    max_json_depth: int = 64
    max_output_text_bytes: int = 1024 * 1024
    max_events_per_request: int = 1000
    # gRPC's own per-message cap: a larger request fails its stream with RESOURCE_EXHAUSTED. 4 MiB
    # holds one event at both payload limits (1 MiB params + 1 MiB result) with room, and keeps the
    # memory one request costs to parse far below the chart's 512 MiB limit.
    max_message_bytes: int = 4 * 1024 * 1024
    # One Evaluate stream per run is the routed mode (a router hashes the stream's run id header),
    # so this cap is also the live routed runs per replica. An idle open stream costs ~25 KiB of RSS
    # (bench/stream_memory.py over 5,000 streams; the chart README), so 10,000 cost ~240 MiB.
    max_streams: int = 10_000
    # An Evaluate stream that sent nothing for this long is closed, so idle clients cannot keep
    # every stream slot.
    stream_idle_timeout_seconds: float = 600.0
    # generated:limits:end


@dataclass(frozen=True, slots=True)
class Security:
    """Transport security for the gRPC port (health stays open for probes)."""

    tls_cert: str | None = None
    tls_key: str | None = None
    tls_client_ca: str | None = None  # set: mTLS, clients must present a cert it signed
    auth_token_file: str | None = None  # set: Evaluate/Check/InspectRun/reflection need the bearer token

    @property
    def tls(self) -> bool:
        return self.tls_cert is not None


@dataclass(frozen=True, slots=True)
class DaemonSettings:
    config_path: str | None = None
    listen: str = DEFAULT_LISTEN
    metrics_listen: str = DEFAULT_METRICS_LISTEN
    drain_grace_seconds: float = 10.0
    max_runs: int = 100_000
    run_idle_ttl_seconds: float = 3600.0
    reflection: bool = True
    log_level: str = "INFO"
    # "json" or "text"; None: text when stderr is a terminal, JSON otherwise (logs.resolve_format).
    log_format: str | None = None
    config_poll_seconds: float = 1.0
    # file:PATH, redis[s]://... or redis[s]+cluster://... (None: memory only); --snapshot PATH means file:PATH.
    state_store: str | None = None
    state_flush_interval_seconds: float = 1.0
    state_key_prefix: str = "loopwarden:"
    health_listen: str | None = None
    # OpenTelemetry traces (the `otel` extra); see tracing.py. None: the OTEL_EXPORTER_OTLP_* variables decide.
    otlp_endpoint: str | None = None
    # The agent-hook endpoints (hooks_http): off unless an address is given.
    hooks_listen: str | None = None
    hooks_fail_closed: bool = False
    hooks_agent: str = ""
    # The largest hook input read (16 MiB): over the event limits it is reduced (hooks/reduction),
    # over this it is answered "not checked" without being read.
    hooks_max_body_bytes: int = 16 * 1024 * 1024
    # Metrics carry a `tenant` label (for the tenants the token file names; others "other").
    tenant_label: bool = False
    limits: Limits = Limits()
    security: Security = Security()


# flag, env var, attribute, parser, help
def _positive_float(text: str) -> float:
    value = float(text)
    if not value > 0:
        raise ValueError("must be > 0")
    return value


def _positive_int(text: str) -> int:
    value = int(text)
    if value <= 0:
        raise ValueError("must be a positive integer")
    return value


def _boolean(text: str) -> bool:
    lowered = text.strip().lower()
    if lowered in ("1", "true", "yes", "on"):
        return True
    if lowered in ("0", "false", "no", "off"):
        return False
    raise ValueError("must be true or false")


def _address(text: str) -> str:
    host, sep, port = text.rpartition(":")
    if not sep or not host or not port.isdigit() or int(port) > 65535:
        raise ValueError("must be HOST:PORT")
    return text


def _state_store(text: str) -> str:
    from .statestore import parse_state_store

    return parse_state_store(text)


def _engine(text: str) -> None:
    """A leftover of the two-engine daemon: `core` is what every daemon runs, anything else is refused."""
    if text.strip().lower() != "core":
        raise ValueError("the Python engine is gone: loopwarden runs the compiled core (loopwarden-core) only; "
                         "drop the flag")


def _log_format(text: str) -> str:
    value = text.strip().lower()
    if value not in ("json", "text"):
        raise ValueError("must be json or text")
    return value


def _log_level(text: str) -> str:
    level = text.strip().upper()
    if level not in ("DEBUG", "INFO", "WARNING", "ERROR"):
        raise ValueError("must be DEBUG, INFO, WARNING or ERROR")
    return level


_OPTIONS = (
    ("--config", "LOOPWARDEN_CONFIG", "config_path", str, "JSON5 config file (default: the embedded default config)"),
    ("--listen", "LOOPWARDEN_LISTEN", "listen", _address, f"gRPC HOST:PORT (default {DEFAULT_LISTEN})"),
    ("--metrics-listen", "LOOPWARDEN_METRICS_LISTEN", "metrics_listen", _address, f"Prometheus HOST:PORT (default {DEFAULT_METRICS_LISTEN})"),
    ("--drain-grace", "LOOPWARDEN_DRAIN_GRACE", "drain_grace_seconds", _positive_float, "seconds to drain streams on SIGTERM (default 10)"),
    ("--max-runs", "LOOPWARDEN_MAX_RUNS", "max_runs", _positive_int, "live runs kept; least recently used evicted first; two or more tenants: an equal share each (default 100000)"),
    ("--run-idle-ttl", "LOOPWARDEN_RUN_IDLE_TTL", "run_idle_ttl_seconds", _positive_float, "seconds after which an idle run is dropped (default 3600)"),
    ("--config-poll", "LOOPWARDEN_CONFIG_POLL", "config_poll_seconds", _positive_float, "seconds between config file change checks (default 1)"),
    ("--log-level", "LOOPWARDEN_LOG_LEVEL", "log_level", _log_level, "DEBUG, INFO, WARNING or ERROR (default INFO)"),
    ("--log-format", "LOOPWARDEN_LOG_FORMAT", "log_format", _log_format, "json: one JSON object per line; text: one short line for a person (default: text when stderr is a terminal, else json)"),
    ("--engine", "LOOPWARDEN_ENGINE", "engine", _engine, "obsolete: every daemon runs the compiled core; only `core` is accepted"),
    # generated:limit-flags:begin (tables/loopwarden.toml [[limit]]: edit there, then `make tables`)
    ("--max-params-bytes", "LOOPWARDEN_MAX_PARAMS_BYTES", "max_params_bytes", _positive_int, "largest params_json accepted (default 1 MiB)"),
    ("--max-result-bytes", "LOOPWARDEN_MAX_RESULT_BYTES", "max_result_bytes", _positive_int, "largest result_json/error accepted (default 1 MiB)"),
    ("--max-run-id-chars", "LOOPWARDEN_MAX_RUN_ID_CHARS", "max_run_id_chars", _positive_int, "longest run_id accepted (default 256)"),
    ("--max-tool-name-chars", "LOOPWARDEN_MAX_TOOL_NAME_CHARS", "max_tool_name_chars", _positive_int, "longest tool_name accepted (default 256)"),
    ("--max-agent-id-chars", "LOOPWARDEN_MAX_AGENT_ID_CHARS", "max_agent_id_chars", _positive_int, "longest agent_id accepted (default 256)"),
    ("--max-session-id-chars", "LOOPWARDEN_MAX_SESSION_ID_CHARS", "max_session_id_chars", _positive_int, "longest session_id accepted (default 256)"),
    ("--max-tool-call-id-chars", "LOOPWARDEN_MAX_TOOL_CALL_ID_CHARS", "max_tool_call_id_chars", _positive_int, "longest tool_call_id accepted (default 256)"),
    ("--max-json-depth", "LOOPWARDEN_MAX_JSON_DEPTH", "max_json_depth", _positive_int, "deepest JSON nesting accepted (default 64)"),
    ("--max-output-text-bytes", "LOOPWARDEN_MAX_OUTPUT_TEXT_BYTES", "max_output_text_bytes", _positive_int, "largest model_output text/text_digest accepted (default 1 MiB)"),
    ("--max-events-per-request", "LOOPWARDEN_MAX_EVENTS_PER_REQUEST", "max_events_per_request", _positive_int, "events one request may carry (default 1000)"),
    ("--max-message-bytes", "LOOPWARDEN_MAX_MESSAGE_BYTES", "max_message_bytes", _positive_int, "largest gRPC message (default 4 MiB)"),
    ("--max-streams", "LOOPWARDEN_MAX_STREAMS", "max_streams", _positive_int, "concurrent Evaluate streams; two or more tenants: an equal share each (default 10000)"),
    ("--stream-idle-timeout", "LOOPWARDEN_STREAM_IDLE_TIMEOUT", "stream_idle_timeout_seconds", _positive_float, "seconds an Evaluate stream may send nothing before it is closed (default 600)"),
    # generated:limit-flags:end
    ("--tenant-label", "LOOPWARDEN_TENANT_LABEL", "tenant_label", _boolean, "true: metrics carry a tenant label (tenants named in the token file; others \"other\") (default false)"),
    ("--state-store", "LOOPWARDEN_STATE_STORE", "state_store", _state_store, "where run state outlives the process: file:PATH (one replica; checkpoints every flush interval) or redis://[user:password@]host:port[/db] / rediss://... (shared by replicas), redis+cluster://host:port[,host:port...] / rediss+cluster://... (Redis Cluster) (default: memory only)"),
    ("--state-flush-interval", "LOOPWARDEN_STATE_FLUSH_INTERVAL", "state_flush_interval_seconds", _positive_float, "seconds between writes of changed runs to the state store (default 1)"),
    ("--state-key-prefix", "LOOPWARDEN_STATE_KEY_PREFIX", "state_key_prefix", str, "prefix of every Redis key the daemon writes (default loopwarden:)"),
    ("--snapshot", "LOOPWARDEN_SNAPSHOT", "snapshot_path", str, "alias of --state-store file:PATH"),
    ("--health-listen", "LOOPWARDEN_HEALTH_LISTEN", "health_listen", _address, "extra plaintext HOST:PORT serving only gRPC health (for probes when the main port needs TLS or a token)"),
    ("--otlp-endpoint", "LOOPWARDEN_OTLP_ENDPOINT", "otlp_endpoint", str, "export OpenTelemetry traces: http(s)://HOST:PORT[/PATH] for OTLP/HTTP, HOST:PORT for OTLP/gRPC in plaintext (needs pip install 'loopwarden[otel]'; default: the standard OTEL_EXPORTER_OTLP_* variables, else off)"),
    ("--hooks-listen", "LOOPWARDEN_HOOKS_LISTEN", "hooks_listen", _address, "HTTP HOST:PORT for the agent-hook endpoints /v1/hooks/claude-code and /v1/hooks/codex, with the gRPC port's TLS and token (default: off)"),
    ("--hooks-fail-closed", "LOOPWARDEN_HOOKS_FAIL_CLOSED", "hooks_fail_closed", _boolean, "true: a hooked tool call the daemon cannot decide (busy, draining) is denied instead of run unchecked (default false)"),
    ("--hooks-agent", "LOOPWARDEN_HOOKS_AGENT", "hooks_agent", str, "agent id of hook events whose URL names none (?agent=ID) (default: the global config)"),
    ("--hooks-max-body-bytes", "LOOPWARDEN_HOOKS_MAX_BODY_BYTES", "hooks_max_body_bytes", _positive_int, "largest hook input read; a tool input or output over --max-params-bytes/--max-result-bytes is judged by its sha256, length and prefix, a larger input is answered 200 'not checked' (a deny with --hooks-fail-closed) (default 16 MiB)"),
    ("--tls-cert", "LOOPWARDEN_TLS_CERT", "tls_cert", str, "PEM certificate chain: serve gRPC over TLS"),
    ("--tls-key", "LOOPWARDEN_TLS_KEY", "tls_key", str, "PEM private key for --tls-cert"),
    ("--tls-client-ca", "LOOPWARDEN_TLS_CLIENT_CA", "tls_client_ca", str, "PEM CA bundle: require client certificates it signed (mTLS)"),
    ("--auth-token-file", "LOOPWARDEN_AUTH_TOKEN_FILE", "auth_token_file", str, "file of bearer tokens clients must send: one token, or one `TENANT TOKEN` per line (a tenant each)"),
)
_LIMIT_FIELDS = frozenset(field.name for field in fields(Limits))
_SECURITY_FIELDS = {"tls_cert", "tls_key", "tls_client_ca", "auth_token_file"}


def add_serve_arguments(parser: argparse.ArgumentParser) -> None:
    for flag, env, dest, parse, help_text in _OPTIONS:
        # A boolean may stand alone (`--hooks-fail-closed` means `--hooks-fail-closed true`).
        alone: dict[str, Any] = {"nargs": "?", "const": "true"} if parse is _boolean else {}
        parser.add_argument(flag, dest=dest, default=None, metavar=flag.strip("-").split("-")[-1].upper(),
                            help=f"{help_text}; env {env}", **alone)
    parser.add_argument("--no-reflection", dest="reflection", action="store_const", const="false", default=None,
                        help="disable gRPC server reflection; env LOOPWARDEN_REFLECTION=false")


def settings_from(args: argparse.Namespace, environ: Mapping[str, str]) -> DaemonSettings:
    """Flags win over environment variables, which win over defaults."""
    values: dict[str, Any] = {}  # each checked by its option's parser
    limits: dict[str, Any] = {}
    security: dict[str, Any] = {}
    for flag, env, dest, parse, _help in _OPTIONS:
        raw = getattr(args, dest, None)
        source = flag
        if raw is None and environ.get(env, "").strip():
            raw, source = environ[env], env
        if raw is None:
            continue
        try:
            value = parse(raw)
        except ValueError as exc:
            raise SettingsError(f"{source}: {exc} (got {raw!r})") from None
        if dest == "engine":  # accepted (core) and dropped: nothing to choose any more
            continue
        target = limits if dest in _LIMIT_FIELDS else security if dest in _SECURITY_FIELDS else values
        target[dest] = value
    reflection = args.reflection if getattr(args, "reflection", None) is not None else environ.get("LOOPWARDEN_REFLECTION")
    if reflection is not None and reflection.strip():
        try:
            values["reflection"] = _boolean(reflection)
        except ValueError as exc:
            raise SettingsError(f"LOOPWARDEN_REFLECTION: {exc} (got {reflection!r})") from None
    snapshot = values.pop("snapshot_path", None)
    if snapshot is not None:
        if "state_store" in values:
            raise SettingsError("--snapshot is an alias of --state-store file:PATH; give one of them")
        values["state_store"] = f"file:{snapshot}"
    if ("tls_cert" in security) != ("tls_key" in security):
        raise SettingsError("--tls-cert and --tls-key go together")
    if "tls_client_ca" in security and "tls_cert" not in security:
        raise SettingsError("--tls-client-ca needs --tls-cert and --tls-key (mTLS is TLS first)")
    return DaemonSettings(**values, limits=Limits(**limits), security=Security(**security))


def parse_serve_args(argv: Sequence[str], environ: Mapping[str, str]) -> DaemonSettings:
    parser = argparse.ArgumentParser(prog="loopwarden serve")
    add_serve_arguments(parser)
    return settings_from(parser.parse_args(list(argv)), environ)
