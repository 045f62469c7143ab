"""Tool rules (`loopwarden.toolRules`) and the duplicate side-effect guard
(`loopwarden.duplicateSideEffect`), end to end through the config loader and the compiled core.

Both are opt-in. Each starts from the reference defaults (W 10, C 20, G 30) with
only the feature under test switched on.
"""
from __future__ import annotations

import pytest

from loopwarden_server.config import load_config_text
from loopwarden_server.config.loader import ConfigError
from loopwarden_server.transport.convert import effective_config
from tests.engine.driver import A, D, R, Run, settings_from

ON = {"enabled": True}  # the embedded default config's switch: the reference's defaults otherwise



def settings(**loopwarden):
    return settings_from({"tools": {"loopDetection": ON}, "loopwarden": loopwarden})


class TestToolRules:
    def test_an_ignored_nonce_makes_25_calls_one_repeated_call(self):
        """Acceptance: `fetch: {ignoreArgs: ["$.nonce"]}`, 25 calls differing only in `nonce`, each
        with the same outcome: call 21 is BLOCKed by generic_repeat with count 20."""
        run = Run(settings(toolRules={"fetch": {"ignoreArgs": ["$.nonce"]}}))
        verdicts = []
        for index in range(25):
            params = {"url": "https://x.test/status", "nonce": f"n{index}"}
            verdict = run.call("fetch", params)
            verdicts.append(verdict)
            if verdict.action != A.block:
                run.outcome("fetch", params, R("the same page"))
        first_block = next(i for i, v in enumerate(verdicts) if v.action == A.block)
        assert (first_block + 1, verdicts[first_block].detector, verdicts[first_block].count) == \
            (21, D.generic_repeat, 20)
        assert [v.action for v in verdicts[:10]] == [A.allow] * 10
        assert verdicts[10].action == A.warn

    def test_without_the_rule_the_same_calls_are_all_new(self):
        run = Run(settings())
        for index in range(25):
            params = {"url": "https://x.test/status", "nonce": f"n{index}"}
            assert run.call("fetch", params).action == A.allow
            run.outcome("fetch", params, R("the same page"))

    def test_a_glob_and_an_alias_are_matched_after_normalisation(self):
        """`Bash` is `exec`, so a rule keyed `BASH` applies to it; `mcp__*` is a glob."""
        rules = settings(toolRules={"BASH": {"ignoreArgs": ["$.requestId"]},
                                    "mcp__*": {"keepArgs": ["$.query"]}})
        assert [r.tool for r in rules.tool_rules.rules] == ["exec", "mcp__*"]
        run = Run(rules)
        for index in range(11):
            run.done("mcp__search__web", {"query": "q", "cursor": index}, R("same"))
        verdict = run.call("mcp__search__web", {"query": "q"})
        assert (verdict.action, verdict.detector, verdict.count) == (A.warn, D.generic_repeat, 11)

    def test_ignored_result_fields_are_not_the_outcome(self):
        """A request id the host adds to every result no longer hides the loop from the breakers."""
        run = Run(settings(toolRules={"status": {"ignoreResult": ["$.details.requestId"]}}))
        verdicts = []
        for index in range(21):
            verdict = run.call("status", {})
            verdicts.append(verdict)
            if verdict.action != A.block:
                run.outcome("status", {}, {"content": [{"type": "text", "text": "up"}],
                                           "details": {"requestId": f"r{index}"}})
        assert (verdicts[-1].action, verdicts[-1].detector, verdicts[-1].count) == \
            (A.block, D.generic_repeat, 20)

    def test_per_agent_rules_merge_over_the_global_ones_by_key(self):
        config = load_config_text("""{
          tools: {loopDetection: {enabled: true}},
          loopwarden: {toolRules: {fetch: {ignoreArgs: ["$.nonce"]}, send_email: {class: "mutating"}}},
          agents: {list: [{id: "a1", loopwarden: {toolRules: {fetch: {keepArgs: ["$.url"]}, read: {class: "readOnly"}}}}]},
        }""")
        rules = {r.tool: r for r in config.settings_for("a1").tool_rules.rules}
        assert sorted(rules) == ["fetch", "read", "send_email"]
        assert [p.text for p in rules["fetch"].keep_args] == ["$.url"] and rules["fetch"].ignore_args == ()
        assert [r.tool for r in config.settings_for("other").tool_rules.rules] == ["fetch", "send_email"]

    def test_inspect_run_shows_the_agent_rules(self):
        rules = settings(toolRules={"fetch": {"class": "readOnly", "ignoreArgs": ["$.nonce", "$.a[*].b"],
                                              "ignoreResult": ["$['x-id']"]}})
        wire = effective_config(rules)
        assert len(wire.tool_rules) == 1
        rule = wire.tool_rules[0]
        assert (rule.tool, rule.tool_class, list(rule.ignore_args), list(rule.ignore_result)) == \
            ("fetch", 1, ["$.nonce", "$.a[*].b"], ["$['x-id']"])


class TestToolRuleValidation:
    @pytest.mark.parametrize(("rule", "path", "problem"), [
        ({"ignoreArgs": ["$.a"], "keepArgs": ["$.b"]}, "loopwarden.toolRules.fetch.keepArgs", "mutually exclusive"),
        ({"class": "writes"}, "loopwarden.toolRules.fetch.class", "must be one of"),
        ({"ignoreArg": ["$.a"]}, "loopwarden.toolRules.fetch.ignoreArg", "unknown key"),
        ({"ignoreArgs": ["nonce"]}, "loopwarden.toolRules.fetch.ignoreArgs[0]", "must start with `$`"),
        ({"ignoreArgs": ["$.a[0]"]}, "loopwarden.toolRules.fetch.ignoreArgs[0]", "indexes"),
        ({"ignoreResult": ["$..id"]}, "loopwarden.toolRules.fetch.ignoreResult[0]", "recursive descent"),
        ({"keepArgs": "$.a"}, "loopwarden.toolRules.fetch.keepArgs", "must be an array"),
        ("readOnly", "loopwarden.toolRules.fetch", "must be an object"),
    ])
    def test_a_bad_rule_is_refused_naming_its_field(self, rule, path, problem):
        with pytest.raises(ConfigError) as error:
            settings(toolRules={"fetch": rule})
        assert error.value.path == path
        assert problem in error.value.problem

    def test_two_keys_that_normalise_alike_are_refused(self):
        with pytest.raises(ConfigError) as error:
            settings(toolRules={"fetch": {}, "FETCH": {"class": "poll"}})
        assert error.value.path == "loopwarden.toolRules.FETCH"
        assert "the same tool" in error.value.problem


class TestDuplicateSideEffect:
    RULES = {"send_email": {"class": "mutating"}, "read": {"class": "readOnly"}}

    def test_a_second_identical_successful_send_is_blocked_and_a_second_read_allowed(self):
        """Acceptance: with send_email mutating and read readOnly, the second identical successful
        send_email is BLOCKed by duplicate_side_effect; a second identical read is ALLOWed."""
        run = Run(settings(duplicateSideEffect={"enabled": True}, toolRules=self.RULES))
        email = {"to": "ana@example.com", "subject": "invoice", "body": "attached"}
        assert run.call("send_email", email, tool_call_id="c1").action == A.allow
        run.outcome("send_email", email, {"content": [{"type": "text", "text": "sent"}]}, tool_call_id="c1")
        verdict = run.call("send_email", email, tool_call_id="c2")
        assert (verdict.action, verdict.detector, verdict.count) == (A.block, D.duplicate_side_effect, 1)
        assert "first call: seq 1, call id c1" in verdict.message
        assert (verdict.evidence_seqs, verdict.evidence_call_ids) == ([1], ["c1"])
        run.done("read", {"path": "inbox"}, R("3 messages"))
        assert run.call("read", {"path": "inbox"}).action == A.allow

    def test_a_failed_send_may_be_retried(self):
        run = Run(settings(duplicateSideEffect={"enabled": True}, toolRules=self.RULES))
        run.done("send_email", {"to": "a"}, error="SMTP 451: try again later")
        assert run.call("send_email", {"to": "a"}).action == A.allow

    def test_off_by_default(self):
        run = Run(settings(toolRules=self.RULES))
        run.done("send_email", {"to": "a"}, R("sent"))
        assert run.call("send_email", {"to": "a"}).action == A.allow


def test_the_example_config_loads():
    """examples/tool-rules.json5, documented in docs/extensions.md, is a valid config."""
    from pathlib import Path

    from loopwarden_server.config.loader import load_config_file

    config = load_config_file(Path(__file__).parents[2] / "examples" / "tool-rules.json5")
    assert config.global_settings.duplicate_side_effect is True
    crawler = {r.tool: r for r in config.settings_for("crawler").tool_rules.rules}
    assert [p.text for p in crawler["fetch"].keep_args] == ["$.url"] and "send_email" in crawler
