"""Agent hooks (Claude Code, Codex): their payloads as loopwarden events, verdicts as their answers.

`protocol` is the pure mapping; the daemon's HTTP endpoints and `loopwarden hook` (`cli`) share it.
`reduction` turns payloads over the daemon's event limits into stand-ins the engine judges.
`asked_calls` remembers the command form's asked calls across its one-hook processes.
"""
from .protocol import (
    INTEGRATION_HEADER, Dialect, HookPayloadError, HookRequest, HookRun, VerdictLike, answer, child_run_id,
    event_name_in, parse, refusal_reason, refused_answer, unavailable_answer, unchecked_answer,
)

__all__ = ["INTEGRATION_HEADER", "Dialect", "HookPayloadError", "HookRequest", "HookRun", "VerdictLike", "answer",
           "child_run_id", "event_name_in", "parse", "refusal_reason", "refused_answer", "unavailable_answer",
           "unchecked_answer"]
