"""Process settings of the daemon: flags, each with a LOOPWARDEN_* environment fallback.

These are the daemon's own knobs (addresses, limits, timings). The detection config lives in the
JSON5 file (see config/); it is reloadable, these are not.
"""
from __future__ import annotations

import argparse
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

DEFAULT_LISTEN = "127.0.0.1:50051"
DEFAULT_METRICS_LISTEN = "127.0.0.1:9464"


class SettingsError(ValueError):
    """A flag or environment value is unusable; the message names it."""


@dataclass(frozen=True, slots=True)
class Limits:
    """Input limits; an event over one is rejected with a stable error code."""

    max_params_bytes: int = 1024 * 1024
    max_result_bytes: int = 1024 * 1024
    max_run_id_chars: int = 256
    max_tool_name_chars: int = 256


@dataclass(frozen=True, slots=True)
class DaemonSettings:
    config_path: str | None = None
    listen: str = DEFAULT_LISTEN
    metrics_listen: str = DEFAULT_METRICS_LISTEN
    drain_grace_seconds: float = 10.0
    max_runs: int = 100_000
    run_idle_ttl_seconds: float = 3600.0
    shards: int = 16
    reflection: bool = True
    log_level: str = "INFO"
    config_poll_seconds: float = 1.0
    limits: Limits = Limits()


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


_OPTIONS = (
    ("--config", "LOOPWARDEN_CONFIG", "config_path", str, "JSON5 config file (default: the embedded default config)"),
    ("--listen", "LOOPWARDEN_LISTEN", "listen", _address, f"gRPC HOST:PORT (default {DEFAULT_LISTEN})"),
    ("--metrics-listen", "LOOPWARDEN_METRICS_LISTEN", "metrics_listen", _address, f"Prometheus HOST:PORT (default {DEFAULT_METRICS_LISTEN})"),
    ("--drain-grace", "LOOPWARDEN_DRAIN_GRACE", "drain_grace_seconds", _positive_float, "seconds to drain streams on SIGTERM (default 10)"),
    ("--max-runs", "LOOPWARDEN_MAX_RUNS", "max_runs", _positive_int, "live runs kept; least recently used evicted first (default 100000)"),
    ("--run-idle-ttl", "LOOPWARDEN_RUN_IDLE_TTL", "run_idle_ttl_seconds", _positive_float, "seconds after which an idle run is dropped (default 3600)"),
    ("--config-poll", "LOOPWARDEN_CONFIG_POLL", "config_poll_seconds", _positive_float, "seconds between config file change checks (default 1)"),
    ("--log-level", "LOOPWARDEN_LOG_LEVEL", "log_level", str.upper, "DEBUG, INFO, WARNING or ERROR (default INFO)"),
    ("--max-params-bytes", "LOOPWARDEN_MAX_PARAMS_BYTES", "max_params_bytes", _positive_int, "largest params_json accepted (default 1 MiB)"),
    ("--max-result-bytes", "LOOPWARDEN_MAX_RESULT_BYTES", "max_result_bytes", _positive_int, "largest result_json/error accepted (default 1 MiB)"),
)
_LIMIT_FIELDS = {"max_params_bytes", "max_result_bytes"}


def add_serve_arguments(parser: argparse.ArgumentParser) -> None:
    for flag, env, dest, _parse, help_text in _OPTIONS:
        parser.add_argument(flag, dest=dest, default=None, metavar=flag.strip("-").split("-")[-1].upper(),
                            help=f"{help_text}; env {env}")
    parser.add_argument("--no-reflection", dest="reflection", action="store_const", const="false", default=None,
                        help="disable gRPC server reflection; env LOOPWARDEN_REFLECTION=false")


def settings_from(args: argparse.Namespace, environ: Mapping[str, str]) -> DaemonSettings:
    """Flags win over environment variables, which win over defaults."""
    values: dict[str, object] = {}
    limits: dict[str, object] = {}
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
        (limits if dest in _LIMIT_FIELDS else values)[dest] = value
    reflection = args.reflection if getattr(args, "reflection", None) is not None else environ.get("LOOPWARDEN_REFLECTION")
    if reflection is not None and reflection.strip():
        try:
            values["reflection"] = _boolean(reflection)
        except ValueError as exc:
            raise SettingsError(f"LOOPWARDEN_REFLECTION: {exc} (got {reflection!r})") from None
    if values.get("log_level", "INFO") not in ("DEBUG", "INFO", "WARNING", "ERROR"):
        raise SettingsError(f"--log-level: must be DEBUG, INFO, WARNING or ERROR (got {values['log_level']!r})")
    return DaemonSettings(**values, limits=Limits(**limits))


def parse_serve_args(argv: Sequence[str], environ: Mapping[str, str]) -> DaemonSettings:
    parser = argparse.ArgumentParser(prog="loopwarden serve")
    add_serve_arguments(parser)
    return settings_from(parser.parse_args(list(argv)), environ)
