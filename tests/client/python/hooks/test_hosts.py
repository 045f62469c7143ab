"""The host registry: one module per host, registered once; what each says it can do."""
from __future__ import annotations

import pytest

from loopwarden.hooks import HOSTS, HookHost, Reply, Stage, host
from loopwarden.hookinstall.hosts import HOSTS as INSTALLABLE

BUILT_IN = ("claude-code", "codex", "gemini-cli", "cursor")  # a later host adds to HOSTS, not to these tests


def test_every_registered_host_is_found_by_name_and_unknown_names_are_refused():
    assert tuple(h.name for h in HOSTS)[:len(BUILT_IN)] == BUILT_IN
    assert all(host(h.name) is h for h in HOSTS) and len({h.name for h in HOSTS}) == len(HOSTS)
    with pytest.raises(KeyError, match="no hook host 'claude'; known: claude-code, codex, gemini-cli, cursor"):
        host("claude")


def test_capabilities_as_the_hosts_document_them():
    table = {h.name: (h.ends_batches, h.reports_subagents, h.can_ask, h.stops_before_tool, h.has_user_turns)
             for h in map(host, BUILT_IN)}
    assert table == {
        "claude-code": (True, True, True, True, True),
        "codex": (False, True, False, False, True),
        "gemini-cli": (False, False, False, True, True),
        "cursor": (False, False, True, False, True),
    }


def test_each_host_names_its_before_tool_events_in_its_own_words():
    assert {h.name: h.before_tool_events for h in map(host, BUILT_IN)} == {
        "claude-code": ("PreToolUse",), "codex": ("PreToolUse",), "gemini-cli": ("BeforeTool",),
        "cursor": ("preToolUse", "beforeShellExecution", "beforeMCPExecution"),
    }


@pytest.mark.parametrize("name", [h.name for h in HOSTS])
def test_the_empty_reply_is_the_empty_answer_at_every_stage(name):
    """ALLOW: loopwarden never says "allow" (that would skip the host's own permission rules)."""
    h = host(name)
    assert all(h.render(Reply(), event) == {} for event in h.stages)


def test_every_host_with_an_install_spec_is_installable_under_its_name():
    assert list(INSTALLABLE) == [h.name for h in HOSTS if h.install is not None]
    assert INSTALLABLE["cursor"].title == "Cursor" and INSTALLABLE["cursor"].project_file == ".cursor/hooks.json"


def test_a_host_module_needs_only_its_stages_read_and_render():
    """The interface a fifth host implements: no other host's code is involved."""

    class Toy(HookHost):
        name = "toy"
        title = "Toy"
        stages = {"beforeCall": Stage.BEFORE_TOOL}

        def read(self, hook_event_name, payload):
            from loopwarden.hooks.host import HookInput, string
            return HookInput(Stage.BEFORE_TOOL, string(payload, "sid"), tool_name=string(payload, "tool"))

        def render(self, reply, hook_event_name):
            return {"block": reply.deny} if reply.deny is not None else {}

    from loopwarden import Action, Verdict
    from loopwarden.hooks import answer, parse

    toy = Toy()
    request = parse(toy, {"hook_event_name": "beforeCall", "sid": "s1", "tool": "grep"})
    assert (request.event.run_id, request.event.tool_name, request.event.accepts_ask) == ("s1", "grep", False)
    blocked = answer(request, Verdict(0, "s1", Action.BLOCK, message="stuck"))
    assert blocked["block"].startswith("stuck If this call still has to run, ask the user")
    assert answer(request, Verdict(0, "s1", Action.WARN, message="careful", announce=True)) == {}
