"""Where the LangChain/LangGraph adapter puts a run in its tree (`_langgraph_runs.place_of`), from
what LangGraph hands a task: its checkpoint namespace, the configured run and thread ids, and the
guarded tool call running it (the context variable)."""
from __future__ import annotations

import pytest

from loopwarden.integrations._langgraph_runs import CALLER, Caller, Place, PromptMemory, place_of, stable_seq


@pytest.fixture
def calling():
    """Run the test's code as a graph started by the guarded call `c7` of run `parent` (root `root`)."""
    token = CALLER.set(Caller("parent", "c7", "root", "tools:t1"))
    yield
    CALLER.reset(token)


class TestPlaceOf:
    def test_a_top_level_graph_is_its_threads_run_kept_across_invocations(self):
        assert Place("t-42", session_id="t-42", per_invocation=False, thread_run=True) == place_of(
            "tools:t9", None, "t-42", fallback="new")

    def test_a_configured_run_id_wins_and_ends_with_the_invocation(self):
        assert Place("r-1", session_id="t-42") == place_of("tools:t9", "r-1", "t-42", fallback="new")

    def test_without_ids_the_fallback_is_the_run(self):
        assert Place("new") == place_of("tools:t9", None, None, fallback="new")

    def test_a_graph_run_by_a_guarded_tool_is_that_calls_child(self, calling):
        assert Place("parent/c7", parent_run_id="parent", root_run_id="root", session_id="t-42") == place_of(
            "tools:t1|model:t2", None, "t-42", fallback="new")

    def test_a_sub_graph_inside_the_tools_graph_stays_under_the_calls_child(self, calling):
        assert "parent/c7/researcher:t3" == place_of("tools:t1|researcher:t3|tools:t4", None, "t-42",
                                                     fallback="new").run_id

    def test_a_sub_graph_node_is_a_child_of_the_threads_run(self):
        assert Place("t-42/researcher:t3", parent_run_id="t-42", root_run_id="t-42", session_id="t-42") == place_of(
            "researcher:t3|tools:t4", None, "t-42", fallback="new")

    def test_a_sub_graph_node_without_a_thread_is_a_root_of_its_own(self):
        assert Place("new") == place_of("researcher:t3|tools:t4", None, None, fallback="new")


class TestStableSeq:
    def test_the_same_parts_give_the_same_seq_apart_from_the_clients_counter(self):
        seq = stable_seq("tool_call", "t-42", "tools:t1", "c7")
        assert seq == stable_seq("tool_call", "t-42", "tools:t1", "c7")
        assert 2 ** 62 <= seq < 2 ** 63
        assert seq != stable_seq("tool_call", "t-42", "tools:t2", "c7")


class TestPromptMemory:
    def test_a_new_prompt_is_a_turn_the_first_and_the_same_are_not(self):
        memory = PromptMemory(capacity=2)
        assert [False, False, True] == [memory.changed("t", "p1"), memory.changed("t", "p1"), memory.changed("t", "p2")]

    def test_the_least_recently_used_run_is_forgotten_past_capacity(self):
        memory = PromptMemory(capacity=1)
        memory.changed("a", "p1")
        memory.changed("b", "p1")
        assert False is memory.changed("a", "p2")
