"""Build events for `evaluate([...])` batches and `check(...)` without touching protobuf.

    from loopwarden import events
    verdicts = client.evaluate([events.tool_call("run-1", "read", {"path": "/a"}),
                                events.tool_call("run-1", "read", {"path": "/b"})])
"""
from ._wire import approval_event as approval
from ._wire import compaction_retry_event as compaction_retry
from ._wire import event_from_dict as from_dict
from ._wire import model_output_event as model_output
from ._wire import run_end_event as run_end
from ._wire import tool_call_event as tool_call
from ._wire import tool_outcome_event as tool_outcome
from ._wire import usage_event as usage
from ._wire import user_turn_event as user_turn

__all__ = ["approval", "compaction_retry", "from_dict", "model_output", "run_end", "tool_call", "tool_outcome", "usage",
           "user_turn"]
