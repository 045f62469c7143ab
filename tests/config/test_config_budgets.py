"""loopwarden.runTree and loopwarden.budgets: defaults, the `number` kind (costUsdPerTree,
warnAt), caps past max_threshold, per-agent merge, and refusals that name the field."""
from __future__ import annotations

import pytest

from loopwarden_server.config import ConfigError, load_config_text


def refusal(text: str) -> str:
    with pytest.raises(ConfigError) as caught:
        load_config_text(text)
    return str(caught.value)


def test_defaults_leave_budgets_off_and_bound_trees():
    s = load_config_text("{}").settings_for("")
    assert (s.run_tree_max_depth, s.run_tree_max_children) == (8, 100)
    assert (s.budget_tool_calls_per_run, s.budget_tool_calls_per_tree, s.budget_tool_seconds_per_tree,
            s.budget_tokens_per_tree, s.budget_cost_usd_per_tree, s.budget_wall_seconds_per_tree) == (0, 0, 0, 0, 0.0, 0)
    assert (s.budget_warn_at, s.on_budget) == (0.8, "abort")


def test_caps_go_past_max_threshold_and_an_agent_switches_an_inherited_one_off():
    config = load_config_text("""{
      loopwarden: {budgets: {tokensPerTree: 4000000000, costUsdPerTree: 12.5, warnAt: 0.5}, onBudget: "ask",
                   runTree: {maxDepth: false}},
      agents: {list: [{id: "free", loopwarden: {budgets: {tokensPerTree: false, costUsdPerTree: false, warnAt: 1}}}]},
    }""")
    base, free = config.settings_for(""), config.settings_for("free")
    assert (base.budget_tokens_per_tree, base.budget_cost_usd_per_tree, base.budget_warn_at) == (4_000_000_000, 12.5, 0.5)
    assert (base.on_budget, base.run_tree_max_depth) == ("ask", 0)
    assert (free.budget_tokens_per_tree, free.budget_cost_usd_per_tree, free.budget_warn_at) == (0, 0.0, 1.0)
    assert free.on_budget == "ask", "inherited from the global block"


@pytest.mark.parametrize(("block", "expected"), [
    ("{budgets: {warnAt: 1.5}}", "loopwarden.budgets.warnAt: must be between 0 and 1, got 1.5"),
    ("{budgets: {costUsdPerTree: \"5\"}}", "loopwarden.budgets.costUsdPerTree: must be a number or false, got \"5\""),
    ("{budgets: {costUsdPerTree: true}}", "loopwarden.budgets.costUsdPerTree: must be a number or false, got true"),
    ("{budgets: {costUsdPerTree: -1}}", "loopwarden.budgets.costUsdPerTree: must be between 0 and 4e+09, got -1"),
    ("{budgets: {toolCallsPerRun: 4000000001}}", "loopwarden.budgets.toolCallsPerRun: must be at most 4000000000, got 4000000001"),
    ("{budgets: {toolCallsPerRun: 2.5}}", "loopwarden.budgets.toolCallsPerRun: must be a positive integer or false, got 2.5"),
    ("{onBudget: \"pause\"}", "loopwarden.onBudget: must be one of \"abort\", \"ask\", got \"pause\""),
    ("{runTree: {maxChildren: -1}}", "loopwarden.runTree.maxChildren: must be a positive integer or false, got -1"),
    ("{budgets: {tokens: 5}}", "loopwarden.budgets.tokens: unknown key (allowed: costUsdPerTree, tokensPerTree, "
                               "toolCallsPerRun, toolCallsPerTree, toolSecondsPerTree, wallSecondsPerTree, warnAt)"),
])
def test_bad_values_are_refused_naming_the_field(block, expected):
    assert expected == refusal(f"{{loopwarden: {block}}}")
