"""Daemon process settings: each flag beats its LOOPWARDEN_* variable, which beats the default; bad values are named."""
from __future__ import annotations

import argparse
import operator
from dataclasses import dataclass

import pytest

from loopwarden_server.settings import SettingsError, parse_serve_args, settings_from


@dataclass(frozen=True)
class Option:
    flag: str
    env: str
    attribute: str  # dotted path inside DaemonSettings
    default: object
    flag_value: str
    flag_expected: object
    env_value: str
    env_expected: object

    def __str__(self) -> str:
        return self.flag

    def read(self, settings) -> object:
        return operator.attrgetter(self.attribute)(settings)


OPTIONS = [
    Option("--config", "LOOPWARDEN_CONFIG", "config_path", None, "/etc/a.json5", "/etc/a.json5", "/etc/b.json5", "/etc/b.json5"),
    Option("--listen", "LOOPWARDEN_LISTEN", "listen", "127.0.0.1:50051", "0.0.0.0:7000", "0.0.0.0:7000", "[::]:7001", "[::]:7001"),
    Option("--metrics-listen", "LOOPWARDEN_METRICS_LISTEN", "metrics_listen", "127.0.0.1:9464", "0.0.0.0:9000", "0.0.0.0:9000", "127.0.0.1:9001", "127.0.0.1:9001"),
    Option("--drain-grace", "LOOPWARDEN_DRAIN_GRACE", "drain_grace_seconds", 10.0, "2.5", 2.5, "30", 30.0),
    Option("--max-runs", "LOOPWARDEN_MAX_RUNS", "max_runs", 100_000, "500", 500, "7", 7),
    Option("--run-idle-ttl", "LOOPWARDEN_RUN_IDLE_TTL", "run_idle_ttl_seconds", 3600.0, "90", 90.0, "0.5", 0.5),
    Option("--config-poll", "LOOPWARDEN_CONFIG_POLL", "config_poll_seconds", 1.0, "0.25", 0.25, "5", 5.0),
    Option("--log-level", "LOOPWARDEN_LOG_LEVEL", "log_level", "INFO", "debug", "DEBUG", "warning", "WARNING"),
    Option("--log-format", "LOOPWARDEN_LOG_FORMAT", "log_format", None, "TEXT", "text", "json", "json"),
    Option("--max-params-bytes", "LOOPWARDEN_MAX_PARAMS_BYTES", "limits.max_params_bytes", 1024 * 1024, "2048", 2048, "4096", 4096),
    Option("--max-result-bytes", "LOOPWARDEN_MAX_RESULT_BYTES", "limits.max_result_bytes", 1024 * 1024, "8192", 8192, "16384", 16384),
]
BY_FLAG = {option.flag: option for option in OPTIONS}

BAD_VALUES = [
    ("--listen", "bad"), ("--listen", "host:"), ("--listen", ":8080"), ("--listen", "host:99999"),
    ("--metrics-listen", "nope"),
    ("--drain-grace", "0"), ("--drain-grace", "-1"), ("--drain-grace", "soon"), ("--drain-grace", "nan"),
    ("--max-runs", "0"), ("--max-runs", "1.5"), ("--max-runs", "many"),
    ("--run-idle-ttl", "0"),
    ("--config-poll", "-0.5"),
    ("--log-level", "verbose"),
    ("--log-format", "pretty"),
    ("--max-params-bytes", "0"),
    ("--max-result-bytes", "-3"),
]


class TestPrecedence:
    @pytest.mark.parametrize("option", OPTIONS, ids=str)
    def test_default_when_neither_is_set(self, option):
        """Without flag or variable the option takes its documented default."""
        assert option.default == option.read(parse_serve_args([], {}))

    @pytest.mark.parametrize("option", OPTIONS, ids=str)
    def test_environment_when_no_flag(self, option):
        """The LOOPWARDEN_* variable is used when the flag is absent."""
        assert option.env_expected == option.read(parse_serve_args([], {option.env: option.env_value}))

    @pytest.mark.parametrize("option", OPTIONS, ids=str)
    def test_flag_beats_environment(self, option):
        """The flag wins over its variable."""
        settings = parse_serve_args([option.flag, option.flag_value], {option.env: option.env_value})

        assert option.flag_expected == option.read(settings)

    @pytest.mark.parametrize("option", OPTIONS, ids=str)
    def test_blank_variable_counts_as_unset(self, option):
        """A variable holding only whitespace leaves the default in place."""
        assert option.default == option.read(parse_serve_args([], {option.env: "  "}))

    def test_options_do_not_leak_into_each_other(self):
        """Setting one option by flag and another by variable changes only those two."""
        settings = parse_serve_args(["--max-runs", "3"], {"LOOPWARDEN_RUN_IDLE_TTL": "9"})

        assert {option.flag: option.read(settings) for option in OPTIONS} == {
            **{option.flag: option.default for option in OPTIONS}, "--max-runs": 3, "--run-idle-ttl": 9.0}

    def test_settings_from_accepts_a_namespace_without_serve_flags(self):
        """settings_from reads only the environment when the namespace carries no serve flags."""
        settings = settings_from(argparse.Namespace(), {"LOOPWARDEN_MAX_RUNS": "12", "LOOPWARDEN_REFLECTION": "off"})

        assert (12, False) == (settings.max_runs, settings.reflection)

    def test_variables_outside_the_table_are_ignored(self):
        """Unrelated or misspelled variables do not change any setting."""
        settings = parse_serve_args([], {"LOOPWARDEN_MAXRUNS": "1", "MAX_RUNS": "1", "PATH": "/bin"})

        assert 100_000 == settings.max_runs


class TestBadValues:
    @pytest.mark.parametrize(("flag", "raw"), BAD_VALUES)
    def test_bad_flag_names_the_flag(self, flag, raw):
        """An unusable flag value raises SettingsError naming the flag and quoting the value."""
        with pytest.raises(SettingsError) as raised:
            parse_serve_args([flag, raw], {})

        assert str(raised.value).startswith(f"{flag}: ")
        assert repr(raw) in str(raised.value)

    @pytest.mark.parametrize(("flag", "raw"), BAD_VALUES)
    def test_bad_variable_names_the_variable(self, flag, raw):
        """An unusable environment value raises SettingsError naming the variable, not the flag."""
        env = BY_FLAG[flag].env

        with pytest.raises(SettingsError) as raised:
            parse_serve_args([], {env: raw})

        assert str(raised.value).startswith(f"{env}: ")
        assert repr(raw) in str(raised.value)

    @pytest.mark.parametrize("option", [o for o in OPTIONS if o.flag != "--config"], ids=str)
    def test_good_flag_shadows_a_bad_variable(self, option):
        """When the flag is given, a broken variable for the same option is never read."""
        settings = parse_serve_args([option.flag, option.flag_value], {option.env: "!!broken!!"})

        assert option.flag_expected == option.read(settings)

    def test_settings_error_is_a_value_error(self):
        """SettingsError is a ValueError, so callers catching bad input in general also catch it."""
        assert issubclass(SettingsError, ValueError)


class TestReflection:
    def test_on_by_default(self):
        """Reflection is enabled unless switched off."""
        assert True is parse_serve_args([], {}).reflection

    @pytest.mark.parametrize("raw", ["false", "FALSE", "0", "no", "off", " false "])
    def test_variable_switches_it_off(self, raw):
        """LOOPWARDEN_REFLECTION=false (or 0, no, off, any case) disables reflection."""
        assert False is parse_serve_args([], {"LOOPWARDEN_REFLECTION": raw}).reflection

    @pytest.mark.parametrize("raw", ["true", "1", "yes", "on"])
    def test_variable_can_say_on(self, raw):
        """LOOPWARDEN_REFLECTION=true (or 1, yes, on) keeps reflection enabled."""
        assert True is parse_serve_args([], {"LOOPWARDEN_REFLECTION": raw}).reflection

    def test_flag_switches_it_off(self):
        """--no-reflection disables reflection."""
        assert False is parse_serve_args(["--no-reflection"], {}).reflection

    def test_flag_beats_variable(self):
        """--no-reflection wins over LOOPWARDEN_REFLECTION=true."""
        assert False is parse_serve_args(["--no-reflection"], {"LOOPWARDEN_REFLECTION": "true"}).reflection

    def test_blank_variable_counts_as_unset(self):
        """An empty LOOPWARDEN_REFLECTION leaves reflection on."""
        assert True is parse_serve_args([], {"LOOPWARDEN_REFLECTION": ""}).reflection

    def test_bad_variable_names_it(self):
        """An unusable LOOPWARDEN_REFLECTION raises SettingsError naming the variable."""
        with pytest.raises(SettingsError) as raised:
            parse_serve_args([], {"LOOPWARDEN_REFLECTION": "maybe"})

        assert "LOOPWARDEN_REFLECTION: must be true or false (got 'maybe')" == str(raised.value)


class TestOneEngine:
    @pytest.mark.parametrize("argv, environ", [(["--engine", "python"], {}), ([], {"LOOPWARDEN_ENGINE": "python"})])
    def test_the_python_engine_is_refused_with_one_line(self, argv, environ):
        """A leftover --engine python (flag or env) stops the start with one line saying why."""
        with pytest.raises(SettingsError) as refused:
            parse_serve_args(argv, environ)

        assert "the Python engine is gone" in str(refused.value) and "\n" not in str(refused.value)

    def test_engine_core_is_accepted_and_changes_nothing(self):
        """`--engine core` (what every daemon runs) is accepted, so old unit files keep starting."""
        assert parse_serve_args(["--engine", "core"], {}) == parse_serve_args([], {})
