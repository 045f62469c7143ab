"""The engine tests that state the spec's rules, run again with every event also judged by the
reference engine (conftest.py pairs each Run with it, tests/differential/pairing.py compares):
each test's own assertions on the core's verdicts, plus, after every event, the reference's
verdict and run state equal to the core's. Only the tests of behaviour the oracle implements are
collected here; the core's own features (batches, judgment presets, cycles, tool rules, run trees,
budgets, ASK) stay in tests/engine alone.
"""
import pytest

from tests.engine import test_engine_judgment as judgment

# Imported to be collected here a second time, paired; the names are used by pytest alone.
from tests.engine.test_engine_boundaries import (  # noqa: F401
    TestGenericRepeat, TestGlobalCircuitBreaker, TestKnownPollNoProgress, TestPingPong, TestUnknownToolRepeat,
)
from tests.engine.test_engine_fidelity import (  # noqa: F401
    TestExternalContentWrappers, TestMcpResults, TestResultsThatAreNotOpenClawShaped, TestToolNameSpellings,
)
from tests.engine.test_engine_host_polls import (  # noqa: F401
    test_claude_code_and_mcp_task_polls_are_known_polls, test_codex_polls_whose_output_changes_are_never_warned,
    test_codex_polls_with_unchanged_output_are_warned_then_blocked_by_call_21,
    test_codex_text_answers_drop_their_header_bookkeeping, test_write_stdin_with_input_is_generic_repeats_to_judge,
)
from tests.engine.test_engine_optin_detectors import (  # noqa: F401
    TestArgumentChurn, TestErrorRepeat, TestPingPongNeedsAnswers, TestRankedAfterTheReference,
)
from tests.engine.test_engine_properties import TestRunIsolation, TestVetoOutcomes  # noqa: F401
from tests.engine.test_engine_rules import (  # noqa: F401
    TestAnnouncements, TestArgsHash, TestGuard, TestOutcomeHash, TestRecords, TestRejects, TestToolNames,
)


@pytest.mark.parametrize("before", [judgment.lost_outcome, judgment.open_batch], ids=["lost outcome", "open batch"])
def test_a_call_without_an_outcome_leaves_judgment_on_under_the_reference_defaults(before):
    """The reference defaults' case of the judgment test (its "fast" cases are the core's alone)."""
    judgment.test_a_call_without_an_outcome_leaves_judgment_on(judgment.REFERENCE, 11, 21, before)
