"""An ASK verdict as a LangGraph `interrupt()`: what the person is shown, and how their answer
(the `Command(resume=...)` value) is read.

The interrupt's value is a plain dict (JSON-able, so any checkpointer and LangGraph Server can
carry it):

    {"type": "loopwarden_ask", "message": ..., "tool": ..., "args": {...}, "tool_call_id": ...,
     "decision_id": ..., "detector": ..., "run_id": ...}

The answer is True / "once" (run this call), "always" (run it, and let the daemon keep a standing
exemption for this agent, tool and arguments), False / None (do not run it), or a dict
`{"approved": bool, "scope": "once" | "always", "ttl_seconds": int}`: the same answers as the
tool guard's `on_ask` (loopwarden.runner), plus the exemption's lifetime.

The interrupt carries them as its `response_schema` (a UI can render it), and LangGraph validates
the resume value against it: one that is no answer raises `pydantic.ValidationError` naming the
field, and nothing is saved, so the interrupt can be answered again (a value the adapter refused
after LangGraph kept it would stay the answer on every later resume).
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Annotated, Any, Literal, Union

from pydantic import ConfigDict, Field, Strict, with_config
from typing_extensions import NotRequired, TypedDict

from ..types import Verdict

ASK_TYPE = "loopwarden_ask"
SCOPES = ("once", "always")


@dataclass(frozen=True, slots=True)
class Answer:
    approved: bool
    scope: str = "once"
    ttl_seconds: int = 0


def payload(verdict: Verdict, *, run_id: str, tool: str, args: Any, tool_call_id: str) -> dict[str, Any]:
    """What the interrupt hands the application to show the person."""
    return {"type": ASK_TYPE, "message": verdict.message, "tool": tool, "args": args, "tool_call_id": tool_call_id,
            "decision_id": verdict.decision_id, "detector": verdict.detector, "run_id": run_id}


@with_config(ConfigDict(extra="forbid"))
class AnswerFields(TypedDict):
    approved: Annotated[bool, Strict()]
    scope: NotRequired[Literal["once", "always"]]
    ttl_seconds: NotRequired[Annotated[int, Strict(), Field(ge=0)]]


# Strict: pydantic would otherwise read "yes" or 1 as True.
RESUME_SCHEMA = Union[Annotated[bool, Strict()], Literal["once", "always"], None, AnswerFields]

_PLAIN = {True: Answer(True), "once": Answer(True), "always": Answer(True, "always"), False: Answer(False),
          None: Answer(False)}


def answer_of(value: Any) -> Answer:
    """The person's answer from a resume value (already validated against RESUME_SCHEMA by
    `interrupt`); ValueError naming the field when it is not one."""
    if isinstance(value, dict):
        return _answer_of_dict(value)
    if (isinstance(value, (bool, str)) or value is None) and value in _PLAIN:
        return _PLAIN[value]
    raise ValueError("loopwarden: resume a loopwarden_ask interrupt with True, 'once', 'always', False, None or "
                     f"{{'approved': bool, 'scope': 'once'|'always', 'ttl_seconds': int}}, got {value!r}")


def _answer_of_dict(value: dict[str, Any]) -> Answer:
    unknown = sorted(set(value) - {"approved", "scope", "ttl_seconds"})
    if unknown:
        raise ValueError(f"loopwarden: the resume value has unknown fields {unknown}: use approved, scope, ttl_seconds")
    approved = value.get("approved")
    if not isinstance(approved, bool):
        raise ValueError(f"loopwarden: resume value field 'approved' must be true or false, got {approved!r}")
    scope = value.get("scope", "once")
    if scope not in SCOPES:
        raise ValueError(f"loopwarden: resume value field 'scope' must be 'once' or 'always', got {scope!r}")
    ttl = value.get("ttl_seconds", 0)
    if not isinstance(ttl, int) or isinstance(ttl, bool) or ttl < 0:
        raise ValueError(f"loopwarden: resume value field 'ttl_seconds' must be a whole number >= 0, got {ttl!r}")
    return Answer(approved, scope, ttl)


def declined_message(verdict: Verdict) -> str:
    """What the model reads when the person said no."""
    return f"A person was asked and declined this call, so it was not run. {verdict.message}"
