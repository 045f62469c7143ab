"""Judgment under `{loopwarden: {preset: "fast"}}` (`loopwarden.sameOutcome`): a repeat is warned
only once identical outcomes show no progress and stopped a call later, and a call whose outcome
never arrives is no evidence and leaves every other call judged. Where the reference defaults'
own verdicts are checked, tests/differential runs the same test on the reference engine too.
"""
import pytest

from tests.engine.driver import A, D, NO_DETECTOR, R, Run, settings_from

FAST = {"loopwarden": {"preset": "fast"}}
REFERENCE = {"tools": {"loopDetection": {"enabled": True}}}
RUNS = (A.allow, A.warn)
PYTEST = ("exec", {"command": "pytest tests/test_x.py"})
READ = ("read", {"path": "notes.md"})


def exec_result(exit_code: int, output: str) -> dict:
    return {"content": [{"type": "text", "text": output}],
            "details": {"status": "completed" if exit_code == 0 else "failed", "exitCode": exit_code, "aggregated": output}}


def rounds(run: Run, call: tuple, outcomes: list) -> list:
    """Each call, and its outcome when it was let through (an error when the outcome is a str)."""
    verdicts = []
    for outcome in outcomes:
        verdict = run.call(*call)
        verdicts.append(verdict)
        if verdict.action in RUNS:
            if isinstance(outcome, str):
                run.outcome(*call, error=outcome)
            else:
                run.outcome(*call, outcome)
    return verdicts


def test_twelve_test_runs_whose_output_changes_between_edits_are_never_warned():
    run = Run(settings_from(FAST))
    verdicts = []
    for i in range(12):
        edit = ("edit", {"path": "src/x.py", "old": f"v{i}", "new": f"v{i + 1}"})
        verdicts += rounds(run, edit, [exec_result(0, "")])
        verdicts += rounds(run, PYTEST, [exec_result(1, f"{12 - i} failed, {i} passed in 0.{i}s")])
    assert [(v.action, v.detector) for v in verdicts if v.action != A.allow] == []


def test_the_same_output_is_warned_at_the_3rd_call_and_stopped_at_the_4th():
    run = Run(settings_from(FAST))
    output = exec_result(1, "FAILED tests/test_x.py::test_a - AssertionError\n1 failed in 0.12s")
    verdicts = rounds(run, PYTEST, [output] * 4)
    assert [v.action for v in verdicts] == [A.allow, A.allow, A.warn, A.block]
    warning, block = verdicts[2], verdicts[3]
    assert (warning.detector, warning.count, block.detector, block.count) == (
        D.generic_repeat, 2, D.generic_repeat, 3)
    # The warning states its evidence: two calls, one unchanged result since the first (seq 1).
    assert warning.message.startswith(
        "WARNING: exec was called 2 times with identical arguments and returned the identical result each time "
        "(unchanged since seq 1)"), warning.message
    assert "the next identical call will be blocked" in warning.message


def test_changing_outcomes_of_a_repeated_call_are_never_warned():
    """Twelve identical calls whose results all differ (a paged feed, a clock): progress."""
    run = Run(settings_from(FAST))
    verdicts = rounds(run, READ, [R(f"page {i}") for i in range(12)])
    assert {v.action for v in verdicts} == {A.allow}


def test_an_identical_error_is_stopped_at_the_4th_call_and_a_transient_one_at_the_5th():
    run = Run(settings_from(FAST))
    verdicts = rounds(run, READ, ["Error: permission denied"] * 4)
    assert [v.action for v in verdicts] == [A.allow, A.allow, A.warn, A.block]
    assert "returned the identical error each time" in verdicts[2].message
    # A 503 may clear on the next retry: one more attempt before the warning, and before the block.
    run = Run(settings_from(FAST))
    verdicts = rounds(run, READ, ["Error: 503 Service Unavailable"] * 5)
    assert [v.action for v in verdicts] == [A.allow, A.allow, A.allow, A.warn, A.block]


def test_a_silent_success_takes_one_more_repeat():
    """A write that prints nothing may have changed what it does not report."""
    run = Run(settings_from(FAST))
    write = ("exec", {"command": "sed -i s/a/b/ x.py"})
    verdicts = rounds(run, write, [exec_result(0, "")] * 5)
    assert [v.action for v in verdicts] == [A.allow, A.allow, A.allow, A.warn, A.block]


def test_silent_writes_of_different_files_are_not_warned_as_churn():
    run = Run(settings_from(FAST))
    verdicts = [v for i in range(9) for v in rounds(run, ("write", {"path": f"src/m{i}.py", "text": "x"}), [R("")])]
    assert {v.action for v in verdicts} == {A.allow}


def test_an_unchanged_poll_is_stopped_at_the_4th_call():
    run = Run(settings_from(FAST))
    verdicts = rounds(run, ("command_status", {"commandId": "c1"}), [R("status: running, no new output")] * 4)
    assert [(v.action, v.detector) for v in verdicts] == [
        (A.allow, NO_DETECTOR), (A.allow, NO_DETECTOR),
        (A.warn, D.known_poll_no_progress), (A.block, D.known_poll_no_progress)]


def loop_after(settings, before) -> list[tuple]:
    """25 identical reads with identical results, after a first completed call and `before`."""
    run = Run(settings)
    run.done("list", {}, R("files"))
    before(run)
    return [(v.action, v.detector, v.count) for v in rounds(run, READ, [R("notes")] * 25)]


def lost_outcome(run: Run) -> None:
    run.call("fetch", {"url": "https://example.com"})  # a crashed tool: no outcome ever comes


def open_batch(run: Run) -> None:
    # Two searches issued together; one answer arrives, the other never does.
    run.call("search", {"q": "a"})
    run.call("search", {"q": "b"})
    run.outcome("search", {"q": "a"}, R(""))


@pytest.mark.parametrize("config, warned_at, stopped_at", [(FAST, 3, 4), (REFERENCE, 11, 21)], ids=["fast", "reference"])
@pytest.mark.parametrize("before", [lost_outcome, open_batch], ids=["lost outcome", "open batch"])
def test_a_call_without_an_outcome_leaves_judgment_on(config, warned_at, stopped_at, before):
    settings = settings_from(config)
    clean = loop_after(settings, lambda run: None)
    actions = [action for action, _, _ in clean]
    assert actions.index(A.warn) + 1 == warned_at, clean
    assert next(i for i, a in enumerate(actions) if a in (A.block, A.abort)) + 1 == stopped_at, clean
    assert loop_after(settings, before) == clean
