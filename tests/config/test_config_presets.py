"""`loopwarden.preset` and the opt-in detectors' settings: defaults beneath everything written."""
from __future__ import annotations

from loopwarden_server.config import load_config_text
from loopwarden_server.config.presets import PRESETS


def settings(text: str, agent: str = ""):
    return load_config_text(text).settings_for(agent)


class TestFastPreset:
    def test_one_line_turns_everything_on(self):
        """`preset: "fast"` alone: detection on, tight thresholds, opt-in detectors, escalation."""
        fast = settings('{loopwarden:{preset:"fast"}}')
        assert (True, 4, 5, 8, 4) == (fast.enabled, fast.warning_threshold, fast.critical_threshold,
                                      fast.global_circuit_breaker_threshold, fast.unknown_tool_threshold)
        assert (6, 10, 5, 6, 3, True, "fast") == (
            fast.argument_churn_warn_at, fast.argument_churn_block_at, fast.error_repeat_threshold,
            fast.run_wide_breaker_threshold, fast.abort_after_blocks, fast.ping_pong_needs_answers, fast.preset)

    def test_explicit_settings_override_it(self):
        """Values written in the file win over the preset, key by key; the order repair still runs."""
        tuned = settings('{tools:{loopDetection:{criticalThreshold:12}}, loopwarden:{preset:"fast", abortAfterBlocks:false,'
                         ' errorRepeat:{threshold:7}}}')
        assert (4, 12, 13, 0, 7, 6) == (tuned.warning_threshold, tuned.critical_threshold,
                                        tuned.global_circuit_breaker_threshold, tuned.abort_after_blocks,
                                        tuned.error_repeat_threshold, tuned.argument_churn_warn_at)

    def test_explicitly_disabled_detection_stays_off(self):
        """`enabled: false` is an explicit setting: the preset does not switch detection back on."""
        assert False is settings('{tools:{loopDetection:{enabled:false}}, loopwarden:{preset:"fast"}}').enabled

    def test_per_agent_preset(self):
        """An agent's preset applies to that agent only; another agent can opt out with "reference"."""
        text = ('{loopwarden:{preset:"fast"}, agents:{list:[{id:"slow", loopwarden:{preset:"reference"}}],'
                ' entries:{quick:{loopwarden:{preset:"fast"}}}}}')
        assert (5, 10) == (settings(text, "quick").critical_threshold, settings(text, "quick").argument_churn_block_at)
        assert (20, 0, "") == (settings(text, "slow").critical_threshold, settings(text, "slow").argument_churn_block_at,
                               settings(text, "slow").preset)
        only_agent = '{agents:{entries:{quick:{loopwarden:{preset:"fast"}}}}}'
        assert (5, None) == (settings(only_agent, "quick").critical_threshold, settings(only_agent).enabled)

    def test_reference_is_the_documented_default(self):
        """`preset: "reference"` resolves exactly like no preset."""
        assert settings("{tools:{loopDetection:{enabled:true}}}") == \
            settings('{tools:{loopDetection:{enabled:true}}, loopwarden:{preset:"reference"}}')
        assert ["fast", "reference"] == sorted(PRESETS)


class TestOptInDetectorSettings:
    def test_off_unless_enabled(self):
        """Values without `enabled: true` switch nothing on."""
        off = settings('{loopwarden:{argumentChurn:{warnAt:3}, errorRepeat:{threshold:4}}}')
        assert (0, 0, 0, False) == (off.argument_churn_warn_at, off.argument_churn_block_at, off.error_repeat_threshold,
                                    off.ranked_after_on)

    def test_recommended_defaults(self):
        """`enabled: true` alone takes the recommended settings: churn 8 / 12, identical errors 5."""
        on = settings('{loopwarden:{argumentChurn:{enabled:true}, errorRepeat:{enabled:true}}}')
        assert (8, 12, 5) == (on.argument_churn_warn_at, on.argument_churn_block_at, on.error_repeat_threshold)

    def test_warn_only_churn(self):
        """`blockAt: false` keeps argument churn to warnings."""
        assert (5, 0) == (lambda s: (s.argument_churn_warn_at, s.argument_churn_block_at))(
            settings('{loopwarden:{argumentChurn:{enabled:true, warnAt:5, blockAt:false}}}'))

    def test_agent_merge_restores_block_above_warn(self):
        """A global blockAt 6 with an agent's warnAt 9: the merged blockAt is raised to 10."""
        text = '{loopwarden:{argumentChurn:{enabled:true, warnAt:4, blockAt:6}}, agents:{entries:{a:{loopwarden:{argumentChurn:{warnAt:9}}}}}}'
        assert (9, 10) == (lambda s: (s.argument_churn_warn_at, s.argument_churn_block_at))(settings(text, "a"))
