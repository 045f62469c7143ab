"""Per-agent overrides in both spellings, and near-miss keys (spec section 2, as amended)."""
from __future__ import annotations

import pytest

from loopwarden_server.config import ConfigError, load_config_text
from loopwarden_server.config.loader import near_miss


def refusal(text: str) -> ConfigError:
    with pytest.raises(ConfigError) as caught:
        load_config_text(text)
    return caught.value


class TestAgentsEntries:
    def test_entries_override_like_list_entries(self):
        """`agents.entries.<id>` merges over the global block exactly like `agents.list[]`."""
        keyed = load_config_text('{tools:{loopDetection:{enabled:true, warningThreshold:8}},'
                                 ' agents:{entries:{"safe-runner":{tools:{loopDetection:{criticalThreshold:9}}}}}}')
        listed = load_config_text('{tools:{loopDetection:{enabled:true, warningThreshold:8}},'
                                  ' agents:{list:[{id:"safe-runner", tools:{loopDetection:{criticalThreshold:9}}}]}}')
        assert keyed.settings_for("safe-runner") == listed.settings_for("safe-runner")
        assert (8, 9, 30) == (lambda s: (s.warning_threshold, s.critical_threshold,
                                         s.global_circuit_breaker_threshold))(keyed.settings_for("safe-runner"))

    def test_merged_order_is_clamped_per_entry(self):
        """An entry that raises W past the global C gets C = W + 1 and G = C + 1, as for a list entry."""
        config = load_config_text('{tools:{loopDetection:{criticalThreshold:12}}, agents:{entries:{a:{tools:{loopDetection:{warningThreshold:40}}}}}}')
        settings = config.settings_for("a")
        assert (40, 41, 42) == (settings.warning_threshold, settings.critical_threshold,
                                settings.global_circuit_breaker_threshold)

    def test_entries_carry_the_loopwarden_block(self):
        """The per-agent `loopwarden` extension block works under entries too."""
        config = load_config_text('{loopwarden:{abortAfterBlocks:3}, agents:{entries:{t:{loopwarden:{shadowMode:true}}}}}')
        settings = config.settings_for("t")
        assert (True, 3) == (settings.shadow, settings.abort_after_blocks)
        assert (False, 3) == (config.settings_for("other").shadow, config.settings_for("other").abort_after_blocks)

    def test_entry_ids_are_trimmed(self):
        """A run's agent id matches the entry key after trimming, like list ids."""
        assert 5 == load_config_text('{agents:{entries:{" a1 ":{tools:{loopDetection:{warningThreshold:5}}}}}}') \
            .settings_for("a1").warning_threshold

    def test_both_forms_together(self):
        """Different ids in the two forms are all agents, list first."""
        config = load_config_text('{agents:{list:[{id:"x"}], entries:{y:{}}}}')
        assert ["x", "y"] == list(config.agent_blocks)

    def test_same_id_in_both_forms_names_both_paths(self):
        """An id in the list and in entries is refused naming both dotted paths."""
        error = refusal('{agents:{list:[{id:"a1"}], entries:{a1:{}}}}')
        assert ("agents.entries.a1", 'duplicate agent id "a1" (first at agents.list[0])') == (error.path, error.problem)


class TestNearMisses:
    @pytest.mark.parametrize(("key", "meant"), [
        ("loopDetecton", "loopDetection"), ("LoopDetection", "loopDetection"), ("loopdetection", "loopDetection"),
        ("loopDetectionn", "loopDetection"), ("loopWarden", "loopwarden"), ("entires", "entries"),
        ("Entries", "entries"), ("LIST", "list"), ("Tools", "tools"), ("agnets", "agents"),
    ])
    def test_close_keys_are_near_misses(self, key, meant):
        """Another case of a key of ours, or 1-2 edits from one of six or more letters."""
        assert meant == near_miss(key, frozenset({"loopDetection", "loopwarden", "entries", "list", "tools", "agents"}))

    @pytest.mark.parametrize("key", ["hooks", "tool", "lists", "loop", "detection", "loopDetectionsXYZ", "agentsxyz"])
    def test_distant_or_short_keys_are_not(self, key):
        """Short keys only match by case; others need at most two edits."""
        assert near_miss(key, frozenset({"loopDetection", "loopwarden", "entries", "list", "tools", "agents"})) is None

    def test_a_misspelled_block_is_refused_with_a_suggestion(self):
        """`tools.loopDetecton` would silently leave detection off: refused, suggesting the key."""
        error = refusal("{tools:{loopDetecton:{enabled:true}}}")
        assert "tools.loopDetecton" == error.path
        assert 'did you mean "loopDetection"?' in error.problem

    def test_openclaw_keys_are_never_near_misses(self):
        """The reference's own keys at these levels load, even two edits from ours (hooks / tools, agent / agents)."""
        config = load_config_text('{hooks:{}, agent:{}, tools:{exec:{}, fs:{}, web:{}}, agents:{defaults:{}, list:[{id:"a", default:true}]}}')
        assert frozenset({"a"}) == config.agent_ids

    def test_unrelated_keys_still_pass(self):
        """Keys far from ours are ignored as before."""
        assert load_config_text('{myFramework:{}, tools:{somethingElse:1}, agents:{other:[]}}').agent_ids == frozenset()
