"""Agent hooks (Claude Code, Codex, Gemini CLI, Cursor, ...): their inputs as loopwarden events,
verdicts as their answers.

`host` is the interface a host implements and `hosts` the registered hosts, one module each;
`protocol` is the host-neutral mapping and `driver` the flow around one hook (asked calls, the
blocked call's outcome), which the daemon's HTTP endpoints and `loopwarden hook` (`cli`) share.
`reduction` turns inputs over the daemon's event limits into stand-ins the engine judges.
`asked_calls` remembers the command form's asked calls across its one-hook processes.
"""
from .host import HookHost, HookPayloadError, Reply, Stage
from .hosts import HOSTS, host
from .protocol import (
    INTEGRATION_HEADER, HookRequest, HookRun, VerdictLike, answer, child_run_id, event_name_in, parse, refusal_reason,
    refused_answer, unavailable_answer, unchecked_answer,
)

__all__ = ["HOSTS", "INTEGRATION_HEADER", "HookHost", "HookPayloadError", "HookRequest", "HookRun", "Reply", "Stage",
           "VerdictLike", "answer", "child_run_id", "event_name_in", "host", "parse", "refusal_reason",
           "refused_answer", "unavailable_answer", "unchecked_answer"]
