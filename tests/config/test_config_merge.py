"""Merge, defaults and clamping (spec section 2, example 20) and the embedded default config."""
from __future__ import annotations

import json

from loopwarden_server.config import Config, default_config_text, load_config_text, load_default_config
from loopwarden_server.config.detection import DEFAULT_TOOL_CATALOG, LoopDetectionSettings


def config_of(global_block: dict | None = None, **agent_blocks: dict) -> Config:
    """A config with `global_block` as tools.loopDetection and one agent per keyword."""
    document: dict = {"tools": {"loopDetection": global_block or {}}}
    document["agents"] = {
        "list": [{"id": agent_id, "tools": {"loopDetection": block}} for agent_id, block in agent_blocks.items()]
    }
    return load_config_text(json.dumps(document))


def thresholds(settings: LoopDetectionSettings) -> tuple[int, int, int]:
    return settings.warning_threshold, settings.critical_threshold, settings.global_circuit_breaker_threshold


class TestExample20:
    """Example 20: agent a1 overrides W and one detector; the rest comes from the global block."""

    CONFIG = config_of(
        {"enabled": True, "warningThreshold": 8, "detectors": {"pingPong": False}},
        a1={"warningThreshold": 5, "detectors": {"genericRepeat": False}},
    )

    def test_agent_gets_merged_settings(self) -> None:
        """a1: enabled, W=5, pingPong off, genericRepeat off, knownPollNoProgress on."""
        assert LoopDetectionSettings(
            enabled=True, warning_threshold=5, ping_pong=False, generic_repeat=False, known_poll_no_progress=True
        ) == self.CONFIG.settings_for("a1")

    def test_other_agents_get_the_global_block(self) -> None:
        """Any other agent: W=8 with the global detectors."""
        assert LoopDetectionSettings(enabled=True, warning_threshold=8, ping_pong=False) == self.CONFIG.settings_for(
            "someone-else"
        )


class TestMerge:
    def test_section2_example_agent(self) -> None:
        """The spec's safe-runner: enabled with W=8, C=16 and the global G=30."""
        config = config_of(
            {"enabled": False}, **{"safe-runner": {"enabled": True, "warningThreshold": 8, "criticalThreshold": 16}}
        )
        assert (True, (8, 16, 30)) == (
            config.settings_for("safe-runner").enabled,
            thresholds(config.settings_for("safe-runner")),
        )
        assert False is config.settings_for("other").enabled

    def test_agent_without_block_gets_global_as_is(self) -> None:
        """A listed agent with no loopDetection block resolves to the global settings."""
        config = load_config_text('{tools:{loopDetection:{historySize:12}}, agents:{list:[{id:"a1"}]}}')
        assert config.global_settings == config.settings_for("a1")
        assert 12 == config.settings_for("a1").history_size

    def test_post_compaction_guard_merges_one_level_deeper(self) -> None:
        """An agent's empty guard block keeps the global windowSize; a set one replaces it."""
        config = config_of(
            {"postCompactionGuard": {"windowSize": 5}},
            keeps={"postCompactionGuard": {}},
            overrides={"postCompactionGuard": {"windowSize": 2}},
        )
        assert 5 == config.settings_for("keeps").compaction_window_size
        assert 2 == config.settings_for("overrides").compaction_window_size
        assert 5 == config.settings_for("unlisted").compaction_window_size

    def test_detectors_merge_one_level_deeper(self) -> None:
        """An agent that switches one detector off keeps the global value of the others."""
        config = config_of({"detectors": {"genericRepeat": False}}, a1={"detectors": {"pingPong": False}})
        settings = config.settings_for("a1")
        assert (False, True, False) == (settings.generic_repeat, settings.known_poll_no_progress, settings.ping_pong)

    def test_each_agent_block_is_validated_on_its_own(self) -> None:
        """Agent C below global W is valid (different blocks) and clamped after merging."""
        config = config_of({"warningThreshold": 10}, a1={"criticalThreshold": 5})
        assert (10, 11, 30) == thresholds(config.settings_for("a1"))


class TestEnabledStates:
    def test_unset_stays_none(self) -> None:
        """`{}` leaves enabled unset (None), not False: the compaction guard still runs."""
        settings = load_config_text("{}").global_settings
        assert None is settings.enabled
        assert (False, True, True) == (settings.rolling_detectors_on, settings.recording_on, settings.compaction_guard_on)

    def test_agent_false_overrides_global_true(self) -> None:
        """An explicit false in the agent block wins over a global true."""
        assert False is config_of({"enabled": True}, a1={"enabled": False}).settings_for("a1").enabled

    def test_agent_true_overrides_global_unset(self) -> None:
        """An agent can switch on what the global block leaves unset."""
        config = config_of({}, a1={"enabled": True})
        assert (True, None) == (config.settings_for("a1").enabled, config.settings_for("other").enabled)

    def test_agent_silence_keeps_global_false(self) -> None:
        """An agent that does not mention enabled inherits an explicit global false."""
        assert False is config_of({"enabled": False}, a1={"warningThreshold": 3}).settings_for("a1").enabled

    def test_agent_null_keeps_global_value(self) -> None:
        """null in the agent block means unset, so the global value stands."""
        assert True is config_of({"enabled": True}, a1={"enabled": None}).settings_for("a1").enabled


class TestClamping:
    def test_critical_raised_above_agent_warning(self) -> None:
        """Global C=12 with agent W=15 resolves to C=16; G=30 already exceeds it."""
        config = config_of({"criticalThreshold": 12}, a1={"warningThreshold": 15})
        assert (15, 16, 30) == thresholds(config.settings_for("a1"))
        assert (10, 12, 30) == thresholds(config.settings_for("other"))

    def test_critical_and_breaker_both_raised(self) -> None:
        """Agent W=40 resolves to C=41 and then G=42."""
        config = config_of({"criticalThreshold": 12}, a1={"warningThreshold": 40})
        assert (40, 41, 42) == thresholds(config.settings_for("a1"))

    def test_breaker_raised_above_agent_critical(self) -> None:
        """Global G=25 with agent C=25 resolves to G=26, leaving W and C alone."""
        config = config_of({"globalCircuitBreakerThreshold": 25}, a1={"criticalThreshold": 25})
        assert (10, 25, 26) == thresholds(config.settings_for("a1"))


class TestDefaults:
    def test_empty_file_gives_documented_defaults(self) -> None:
        """`{}` resolves to the documented defaults with enabled unset and an empty catalog."""
        config = load_config_text("{}")
        assert LoopDetectionSettings() == config.global_settings
        assert (30, 10, 20, 10, 30, 3) == (
            config.global_settings.history_size,
            config.global_settings.warning_threshold,
            config.global_settings.critical_threshold,
            config.global_settings.unknown_tool_threshold,
            config.global_settings.global_circuit_breaker_threshold,
            config.global_settings.compaction_window_size,
        )
        assert (frozenset(), DEFAULT_TOOL_CATALOG) == (config.agent_ids, config.tool_catalog)

    def test_embedded_default_config_is_the_documented_defaults_switched_on(self) -> None:
        """The shipped default config enables detection and otherwise keeps every default."""
        config = load_default_config()
        assert LoopDetectionSettings(enabled=True) == config.global_settings
        assert (frozenset(), DEFAULT_TOOL_CATALOG) == (config.agent_ids, config.tool_catalog)

    def test_embedded_default_config_writes_every_key_out(self) -> None:
        """Every documented key is spelled out in the default file, so it doubles as a reference."""
        block = load_default_config().global_block
        assert None not in (
            block.enabled,
            block.history_size,
            block.warning_threshold,
            block.critical_threshold,
            block.unknown_tool_threshold,
            block.global_circuit_breaker_threshold,
            block.detectors.generic_repeat,
            block.detectors.known_poll_no_progress,
            block.detectors.ping_pong,
            block.post_compaction_guard.window_size,
        )

    def test_embedded_default_config_is_commented(self) -> None:
        """The default file explains itself, including W < C < G and per-agent overrides."""
        text = default_config_text()
        assert "//" in text
        assert "W < C < G" in text
        assert "agents" in text and "id:" in text


class TestLookup:
    CONFIG = config_of({"warningThreshold": 7}, a1={"warningThreshold": 3})

    def test_unknown_agent_gets_global(self) -> None:
        """An agent id that is not listed resolves to the global settings."""
        assert self.CONFIG.global_settings == self.CONFIG.settings_for("not-listed")

    def test_empty_agent_id_gets_global(self) -> None:
        """An empty or blank agent id resolves to the global settings."""
        assert (self.CONFIG.global_settings, self.CONFIG.global_settings) == (
            self.CONFIG.settings_for(""),
            self.CONFIG.settings_for("   "),
        )

    def test_agent_id_is_compared_after_strip(self) -> None:
        """A run's agent id with surrounding spaces matches the listed agent."""
        assert 3 == self.CONFIG.settings_for(" a1\n").warning_threshold

    def test_agent_ids_lists_the_configured_agents(self) -> None:
        """agent_ids is the set of listed ids."""
        assert frozenset({"a1"}) == self.CONFIG.agent_ids


class TestExtensions:
    """The `loopwarden` extension settings: off by default, global + per-agent, merged like the rest."""

    def test_extensions_are_off_by_default(self):
        """A file without a loopwarden block leaves every extension off."""
        settings = load_config_text("{tools: {loopDetection: {enabled: true}}}").settings_for("")
        assert (0, 0, False) == (settings.abort_after_blocks, settings.run_wide_breaker_threshold, settings.shadow)

    def test_agents_override_global_extensions_key_by_key(self):
        """An agent can switch an inherited limit off (false), add shadow mode, and keep the rest."""
        config = load_config_text("""{
          loopwarden: {abortAfterBlocks: 3, runWideBreaker: {enabled: true, threshold: 12}},
          agents: {list: [
            {id: "a1", loopwarden: {shadowMode: true, abortAfterBlocks: false}},
            {id: "a2", loopwarden: {runWideBreaker: {threshold: 50}}},
            {id: "a3"},
          ]},
        }""")
        summary = {agent: (s.abort_after_blocks, s.run_wide_breaker_threshold, s.shadow)
                   for agent in ("", "a1", "a2", "a3") for s in [config.settings_for(agent)]}
        assert {"": (3, 12, False), "a1": (0, 12, True), "a2": (3, 50, False), "a3": (3, 12, False)} == summary

    def test_run_wide_breaker_needs_enabled(self):
        """A threshold alone does not switch the breaker on; enabled alone uses the default 40."""
        off = load_config_text("{loopwarden: {runWideBreaker: {threshold: 9}}}").settings_for("")
        default = load_config_text("{loopwarden: {runWideBreaker: {enabled: true}}}").settings_for("")
        assert (0, 40) == (off.run_wide_breaker_threshold, default.run_wide_breaker_threshold)
