"""Config loading and validation (spec section 2, example 21): one fixture file per failure mode."""
from __future__ import annotations

import dataclasses
from pathlib import Path

import pytest

from loopwarden_server.config import Config, ConfigError, load_config_file, load_config_text
from loopwarden_server.config.check import summary
from loopwarden_server.config.detection import ToolCatalog
from loopwarden_server.config.tables import BLOCKS, SETTINGS

FIXTURES = Path(__file__).parent / "fixtures"
INVALID = sorted((FIXTURES / "invalid").glob("*.json5"))
VALID = sorted((FIXTURES / "valid").glob("*.json5"))


def first_line_value(path: Path, marker: str) -> str:
    first_line = path.read_text(encoding="utf-8").splitlines()[0]
    assert first_line.startswith(marker), f"{path.name} must start with {marker!r}"
    return first_line.removeprefix(marker)


def keys_of(block: str, *, per_agent: bool) -> str:
    """The keys a block accepts, as the loader lists them: its settings and its child blocks."""
    keys = [row.key for row in SETTINGS if row.block == block and not (per_agent and row.scope == "global")]
    keys += [child.rsplit(".", 1)[1] for child in BLOCKS if child.rsplit(".", 1)[0] == block and "." in child]
    return ", ".join(sorted(keys))


# The `loopwarden` block grows with each extension: its fixtures name the list by placeholder, so
# a new setting is not a hand edit of every fixture. The fixed blocks keep their literal lists.
PLACEHOLDERS = {"{keys of loopwarden}": keys_of("loopwarden", per_agent=False),
                "{keys of an agent's loopwarden}": keys_of("loopwarden", per_agent=True)}


def expected_message(path: Path) -> str:
    expected = first_line_value(path, "// expect: ")
    for placeholder, keys in PLACEHOLDERS.items():
        expected = expected.replace(placeholder, keys)
    return expected


def refusal(text: str) -> ConfigError:
    with pytest.raises(ConfigError) as caught:
        load_config_text(text)
    return caught.value


class TestInvalidFixtures:
    def test_every_failure_mode_has_a_fixture(self) -> None:
        """The parametrized test below cannot pass vacuously on an emptied directory."""
        assert len(INVALID) >= 25

    @pytest.mark.parametrize("path", INVALID, ids=lambda path: path.stem)
    def test_fixture_is_refused_with_its_expected_message(self, path: Path) -> None:
        """Each invalid file is refused with exactly the message on its `// expect:` line."""
        expected = expected_message(path)
        with pytest.raises(ConfigError) as caught:
            load_config_text(path.read_text(encoding="utf-8"), source=path.name)
        assert expected == str(caught.value)
        assert expected == f"{caught.value.path}: {caught.value.problem}"


    def test_the_placeholders_expand_to_the_blocks_keys(self) -> None:
        """The global block is an agent's plus the global-only tool catalog and tenant shares, and
        both hold the extensions the README documents."""
        global_keys = set(PLACEHOLDERS["{keys of loopwarden}"].split(", "))
        agent_keys = set(PLACEHOLDERS["{keys of an agent's loopwarden}"].split(", "))
        assert global_keys - agent_keys == {"providerSendTools", "extraPollTools", "tenantMaxRuns", "tenantMaxStreams"}
        assert {"preset", "abortAfterBlocks", "argumentChurn", "errorRepeat", "runWideBreaker", "shadowMode",
                "pingPongNeedsAnswers"} <= agent_keys


class TestValidFixtures:
    @pytest.mark.parametrize("path", VALID, ids=lambda path: path.stem)
    def test_fixture_loads_to_its_expected_summary(self, path: Path) -> None:
        """Each valid file loads, and its resolved global settings and agents match `// summary:`."""
        expected = first_line_value(path, "// summary: ")
        assert expected == summary(load_config_file(path))

    def test_pasted_framework_config_keeps_only_our_keys(self) -> None:
        """Unrelated keys are ignored while our blocks are read, per agent and for the catalog."""
        config = load_config_file(FIXTURES / "valid" / "copy_paste_agent_framework.json5")
        assert frozenset({"main", "researcher", "ops"}) == config.agent_ids
        assert False is config.settings_for("researcher").ping_pong
        assert 12 == config.settings_for("researcher").warning_threshold
        assert False is config.settings_for("ops").enabled
        assert config.global_settings == config.settings_for("main")
        assert ToolCatalog(
            provider_send_tools=frozenset({"telegram", "slack"}),
            extra_poll_tools=frozenset({"job_status"}),
        ) == config.tool_catalog


class TestExample21:
    """Example 21: each refusal names its field."""

    def test_warning_equal_to_critical_names_critical(self) -> None:
        """`{warningThreshold:10, criticalThreshold:10}` is refused at criticalThreshold."""
        error = refusal("{tools:{loopDetection:{warningThreshold:10, criticalThreshold:10}}}")
        assert "tools.loopDetection.criticalThreshold" == error.path

    def test_zero_warning_names_warning(self) -> None:
        """`{warningThreshold:0}` is refused at warningThreshold."""
        error = refusal("{tools:{loopDetection:{warningThreshold:0}}}")
        assert "tools.loopDetection.warningThreshold: must be a positive integer, got 0" == str(error)

    def test_fractional_history_size_names_history_size(self) -> None:
        """`{historySize:2.5}` is refused at historySize."""
        error = refusal("{tools:{loopDetection:{historySize:2.5}}}")
        assert "tools.loopDetection.historySize: must be a positive integer, got 2.5" == str(error)

    def test_unknown_key_names_the_key(self) -> None:
        """An unknown key such as `repeatThreshold` is refused at that key."""
        error = refusal("{tools:{loopDetection:{repeatThreshold:3}}}")
        assert "tools.loopDetection.repeatThreshold" == error.path
        assert error.problem.startswith("unknown key (allowed: criticalThreshold, ")


class TestValues:
    def test_integral_float_is_stored_as_int(self) -> None:
        """`10.0` is accepted and stored as the int 10."""
        block = load_config_text("{tools:{loopDetection:{warningThreshold:10.0}}}").global_block
        assert 10 == block.warning_threshold
        assert int is type(block.warning_threshold)

    def test_bounds_are_inclusive(self) -> None:
        """The hard upper bounds themselves are allowed."""
        config = load_config_text(
            "{tools:{loopDetection:{historySize:1000, globalCircuitBreakerThreshold:1000000,"
            " postCompactionGuard:{windowSize:1000}}}}"
        )
        assert (1000, 1_000_000, 1000) == (
            config.global_settings.history_size,
            config.global_settings.global_circuit_breaker_threshold,
            config.global_settings.compaction_window_size,
        )

    def test_null_means_unset(self) -> None:
        """A key set to null reads exactly like an absent key."""
        assert load_config_text("{}") == load_config_text(
            "{tools:{loopDetection:{enabled:null, warningThreshold:null, detectors:{pingPong:null}}}}"
        )

    def test_order_is_checked_only_between_values_a_block_sets(self) -> None:
        """A block with W above the default C is valid; resolution restores the order."""
        settings = load_config_text("{tools:{loopDetection:{warningThreshold:25}}}").global_settings
        assert (25, 26, 30) == (
            settings.warning_threshold,
            settings.critical_threshold,
            settings.global_circuit_breaker_threshold,
        )

    def test_tool_names_are_normalized(self) -> None:
        """Catalog entries go through normalize_tool_name: trimmed, lower-cased, aliases folded."""
        config = load_config_text('{loopwarden:{providerSendTools:[" Telegram ", "BASH"], extraPollTools:[]}}')
        assert ToolCatalog(provider_send_tools=frozenset({"telegram", "exec"})) == config.tool_catalog

    def test_agent_ids_are_stripped(self) -> None:
        """An id written with spaces is stored without them."""
        config = load_config_text('{agents:{list:[{id:"  a1 "}]}}')
        assert frozenset({"a1"}) == config.agent_ids


class TestErrors:
    def test_config_error_carries_path_and_problem(self) -> None:
        """ConfigError exposes the dotted path and the problem separately and joins them in str()."""
        error = refusal('{tools:{loopDetection:{enabled:"yes"}}}')
        assert ("tools.loopDetection.enabled", 'must be true or false, got "yes"') == (error.path, error.problem)
        assert isinstance(error, ValueError)

    def test_syntax_error_in_text_names_the_source(self) -> None:
        """A JSON5 syntax error is reported against the `source` given to load_config_text."""
        with pytest.raises(ConfigError) as caught:
            load_config_text("{tools:", source="inline")
        assert "inline" == caught.value.path
        assert caught.value.problem.startswith("invalid JSON5: line 1: ")

    def test_long_values_are_shortened_in_messages(self) -> None:
        """A huge bad value does not flood the log line."""
        error = refusal("[" + ", ".join(["1"] * 200) + "]")
        assert error.problem.endswith("...")
        assert len(error.problem) < 120

    def test_deep_nesting_is_a_config_error(self) -> None:
        """Pathologically nested input is refused as a config error, not a crash."""
        error = refusal("[" * 5000 + "]" * 5000)
        assert "<string>: invalid JSON5: nested too deeply" == str(error)


class TestFileLoading:
    def test_syntax_error_names_the_file(self, tmp_path: Path) -> None:
        """A JSON5 syntax error in a file is reported against the file's path."""
        path = tmp_path / "broken.json5"
        path.write_text("{\n  tools: {\n", encoding="utf-8")
        with pytest.raises(ConfigError) as caught:
            load_config_file(path)
        assert str(path) == caught.value.path

    def test_validation_error_is_not_prefixed(self, tmp_path: Path) -> None:
        """A validation error from a file has the same message as from text."""
        path = tmp_path / "zero.json5"
        path.write_text("{tools:{loopDetection:{warningThreshold:0}}}", encoding="utf-8")
        with pytest.raises(ConfigError) as caught:
            load_config_file(path)
        assert "tools.loopDetection.warningThreshold: must be a positive integer, got 0" == str(caught.value)

    def test_byte_order_mark_is_accepted(self, tmp_path: Path) -> None:
        """A UTF-8 file saved with a BOM loads."""
        path = tmp_path / "bom.json5"
        path.write_bytes(b"\xef\xbb\xbf{tools:{loopDetection:{enabled:true}}}")
        assert True is load_config_file(path).global_settings.enabled

    def test_non_utf8_file_is_a_config_error(self, tmp_path: Path) -> None:
        """Bytes that are not UTF-8 are refused as a config problem naming the file."""
        path = tmp_path / "latin1.json5"
        path.write_bytes(b"{agents:{list:[{id:'caf\xe9'}]}}")
        with pytest.raises(ConfigError) as caught:
            load_config_file(path)
        assert str(path) == caught.value.path
        assert caught.value.problem.startswith("invalid JSON5: not UTF-8 text")

    def test_missing_file_raises_os_error(self, tmp_path: Path) -> None:
        """An unreadable file is not a config problem: the OSError reaches the caller."""
        with pytest.raises(FileNotFoundError):
            load_config_file(tmp_path / "absent.json5")


class TestImmutability:
    def test_config_is_frozen(self) -> None:
        """Attributes of a loaded Config cannot be reassigned."""
        config = load_config_text("{}")
        with pytest.raises(dataclasses.FrozenInstanceError):
            config.tool_catalog = ToolCatalog()  # type: ignore[misc]

    def test_mappings_are_read_only(self) -> None:
        """The per-agent mappings reject writes."""
        config = load_config_text('{agents:{list:[{id:"a1"}]}}')
        with pytest.raises(TypeError):
            config.agent_settings["b2"] = config.global_settings  # type: ignore[index]
        with pytest.raises(TypeError):
            config.agent_blocks["b2"] = config.global_block  # type: ignore[index]

    def test_config_copies_the_mappings_it_is_given(self) -> None:
        """Mutating the dict used to build a Config does not change the Config."""
        source = load_config_text("{}")
        agent_blocks = {"a1": source.global_block}
        config = Config(
            global_block=source.global_block,
            agent_blocks=agent_blocks,
            tool_catalog=source.tool_catalog,
            global_settings=source.global_settings,
            agent_settings={},
        )
        agent_blocks["b2"] = source.global_block
        assert frozenset({"a1"}) == config.agent_ids
