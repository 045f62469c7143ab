"""Args and outcome fingerprints (spec sections 3 and 4).

An args hash identifies "the same call"; an outcome hash identifies "the same result". Both are
taken over canonical JSON, and the outcome hash deliberately leaves out what changes without
meaning progress: exec durations, PIDs, session ids and working dirs; delivery ids and timestamps
of sent messages; the random ids of external-content wrappers. Results that are not OpenClaw-shaped
(no `content`, no `details`) are hashed whole; MCP results add `structuredContent` and `isError`.
"""
from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any

from .external_content import blank_wrapper_ids, blank_wrapper_ids_in
from .hostpolls import is_host_poll, without_bookkeeping
from .jsonvalues import digest_bytes
from .settings import ToolCatalog
from .state import ERROR, PENDING, RESULT, result_hash_text

_UNKNOWN_TOOL_PATTERNS = (
    re.compile(r"unknown tool[:\s]+[\"']?([a-z0-9_.-]+)", re.IGNORECASE),
    re.compile(r"tool\s+[\"']?([a-z0-9_.-]+)[\"']?\s+(?:not found|is not available)", re.IGNORECASE),
)

_SEND_LIKE_MESSAGE_ACTIONS = frozenset(
    {"send", "broadcast", "reply", "thread-reply", "sendWithEffect", "sendAttachment",
     "upload-file", "sticker", "poll"}
)

# Per-delivery ids and timestamps: a fresh one on every send, so never evidence of progress.
_VOLATILE_SEND_KEYS = frozenset(
    {"messageId", "message_id", "messageIds", "platformMessageId", "platformMessageIds",
     "fileId", "file_id", "fileKey", "pollId", "poll_id", "receipt", "runId", "idempotencyKey",
     "ts", "timestamp", "sentAt", "deliveredAt", "createdAt"}
)

_POLL_ACTIONS = ("poll", "log")


# NOTE: not frozen: a frozen dataclass's __init__ goes through object.__setattr__ per field, which
# costs microseconds on the per-event path. Instances are never mutated after construction.
@dataclass(slots=True)
class OutcomeFingerprint:
    status: int  # RESULT or ERROR; PENDING means "no hash: record nothing"
    digest: bytes = b""
    unknown_tool_name: str | None = None

    @property
    def result_hash(self) -> str | None:
        """The spec's spelling: 64 hex, or "error:" + 64 hex; None when there is no hash."""
        return result_hash_text(self.status, self.digest)


NO_OUTCOME = OutcomeFingerprint(PENDING)


def plan_shape(value: Any) -> Any:
    """Reduce update_plan params/details to their shape: rewording is not progress."""
    if not isinstance(value, dict):
        return value
    raw_plan = value.get("plan")
    steps = raw_plan if isinstance(raw_plan, list) else []
    statuses = []
    presence = []
    for step in steps:
        if isinstance(step, dict):
            status = step.get("status")
            text = step.get("step")
            statuses.append(status if isinstance(status, str) else None)
            presence.append(isinstance(text, str) and bool(text.strip()))
        else:
            statuses.append(None)
            presence.append(False)
    explanation = value.get("explanation")
    return {
        "planLength": len(steps),
        "statuses": statuses,
        "stepPresence": presence,
        "hasExplanation": isinstance(explanation, str) and bool(explanation.strip()),
    }


def args_digest(tool_name: str, params: Any) -> bytes:
    """sha256 of the canonical params (plan shape for update_plan); with the tool name, the call."""
    if tool_name == "update_plan":
        params = plan_shape(params)
    return digest_bytes(params)


def args_hash(tool_name: str, params: Any) -> str:
    """The spec's spelling: `tool:` + 64 hex."""
    return f"{tool_name}:{args_digest(tool_name, params).hex()}"


def is_known_poll(tool_name: str, params: Any, catalog: ToolCatalog) -> bool:
    if tool_name == "command_status" or tool_name in catalog.extra_poll_tools:
        return True
    if is_host_poll(tool_name, params):
        return True
    return (
        tool_name == "process"
        and isinstance(params, dict)
        and params.get("action") in _POLL_ACTIONS
    )


def unknown_tool_name(error_text: str) -> str | None:
    text = error_text.strip()
    for pattern in _UNKNOWN_TOOL_PATTERNS:
        match = pattern.search(text)
        if match:
            return match.group(1).lower()
    return None


def _text_content(result: dict) -> str:
    content = result.get("content")
    if not isinstance(content, list):
        return ""
    texts = [
        entry["text"]
        for entry in content
        if isinstance(entry, dict)
        and isinstance(entry.get("type"), str)
        and isinstance(entry.get("text"), str)
    ]
    return "\n".join(texts).strip()


def _str_or_none(value: Any) -> str | None:
    return value if isinstance(value, str) else None


def _exec_hash(details: dict, text: str) -> bytes | None:
    status = details.get("status")
    if not isinstance(status, str):
        return None
    if status == "running":
        return digest_bytes({"status": status, "tail": _str_or_none(details.get("tail")) or ""})
    if status in ("completed", "failed"):
        exit_code = details.get("exitCode")
        aggregated = details.get("aggregated")
        output = aggregated.strip() if isinstance(aggregated, str) else ""
        return digest_bytes({
            "status": status,
            "exitCode": exit_code if isinstance(exit_code, (int, float)) and not isinstance(exit_code, bool) else None,
            "timedOut": details.get("timedOut") is True,
            "output": output or text,
        })
    if status in ("approval-pending", "approval-unavailable"):
        return digest_bytes({
            "status": status,
            "reason": _str_or_none(details.get("reason")),
            "host": _str_or_none(details.get("host")),
            "command": _str_or_none(details.get("command")) or "",
            "warningText": _str_or_none(details.get("warningText")) or "",
        })
    return None


def _process_hash(action: str, details: dict, text: str) -> bytes:
    if action == "poll":
        return digest_bytes({
            "action": action,
            "status": details.get("status"),
            "exitCode": details.get("exitCode"),
            "exitSignal": details.get("exitSignal"),
            "aggregated": details.get("aggregated"),
            "text": text,
        })
    return digest_bytes({
        "action": action,
        "status": details.get("status"),
        "totalLines": details.get("totalLines"),
        "totalChars": details.get("totalChars"),
        "truncated": details.get("truncated"),
        "exitCode": details.get("exitCode"),
        "exitSignal": details.get("exitSignal"),
        "text": text,
    })


def _is_send(tool_name: str, params: Any, catalog: ToolCatalog) -> bool:
    if tool_name == "sessions_send":
        return True
    action = params.get("action") if isinstance(params, dict) else None
    if tool_name == "message":
        return isinstance(action, str) and action in _SEND_LIKE_MESSAGE_ACTIONS
    if tool_name in catalog.provider_send_tools:
        # A provider tool's other actions (read, edit, react) are real state and hash in full.
        return action is None or (isinstance(action, str) and action in _SEND_LIKE_MESSAGE_ACTIONS)
    return False


def _is_message_object(value: dict) -> bool:
    """A delivered message carries its own fresh id; other ids (routes, chats) are stable."""
    return (
        isinstance(value.get("id"), str)
        and isinstance(value.get("text"), str)
        and (
            isinstance(value.get("direction"), str)
            or isinstance(value.get("senderId"), str)
            or isinstance(value.get("accountId"), str)
            or isinstance(value.get("conversation"), dict)
        )
    )


def strip_volatile_send_ids(value: Any) -> Any:
    if isinstance(value, list):
        return [strip_volatile_send_ids(item) for item in value]
    if not isinstance(value, dict):
        return value
    drop_id = _is_message_object(value)
    return {
        key: strip_volatile_send_ids(nested)
        for key, nested in value.items()
        if key not in _VOLATILE_SEND_KEYS and not (drop_id and key == "id")
    }


def outcome_fingerprint(
    tool_name: str,
    params: Any,
    result: Any,
    error: str | None,
    catalog: ToolCatalog,
    *,
    has_result: bool,
    wrapped: bool = True,
) -> OutcomeFingerprint:
    """Hash what a call returned, in the order of spec section 4.

    `wrapped`: the outcome may contain external-content wrappers (the caller knows cheaply from
    the raw JSON text); their ids are then blanked before hashing.
    """
    if error is not None:
        text = blank_wrapper_ids(error) if wrapped else error
        return OutcomeFingerprint(ERROR, digest_bytes(text), unknown_tool_name(error))
    if not has_result:
        return NO_OUTCOME
    if wrapped:
        result = blank_wrapper_ids_in(result)
    if is_host_poll(tool_name, params):
        # A host poll's per-call bookkeeping (wall time, chunk id, timestamp) is not its output.
        result = without_bookkeeping(result)
    if not isinstance(result, dict):
        return OutcomeFingerprint(RESULT, digest_bytes(result))
    if "content" not in result and "details" not in result:
        # Not OpenClaw-shaped (an MCP server's structured value, a plain function's dict): the
        # whole object is the outcome, or every {"value": …} would look identical.
        if _is_send(tool_name, params, catalog):
            return OutcomeFingerprint(RESULT, digest_bytes(strip_volatile_send_ids(result)))
        return OutcomeFingerprint(RESULT, digest_bytes(result))

    raw_details = result.get("details")
    details = raw_details if isinstance(raw_details, dict) else {}
    text = _text_content(result)

    if details.get("status") == "blocked" and details.get("deniedReason") == "tool-loop":
        # Our own veto: never progress, and it must not reset a streak (sticky blocks).
        return NO_OUTCOME
    if tool_name == "exec":
        exec_hash = _exec_hash(details, text)
        if exec_hash is not None:
            return OutcomeFingerprint(RESULT, exec_hash)
    if tool_name == "process" and isinstance(params, dict):
        action = params.get("action")
        if action in _POLL_ACTIONS:
            return OutcomeFingerprint(RESULT, _process_hash(action, details, text))
    if _is_send(tool_name, params, catalog):
        return OutcomeFingerprint(RESULT, digest_bytes(strip_volatile_send_ids(details)))
    if tool_name == "update_plan":
        return OutcomeFingerprint(RESULT, digest_bytes({"details": plan_shape(details), "text": ""}))
    if "structuredContent" in result or "isError" in result:
        # An MCP CallToolResult: its structured value and error flag are part of what it returned.
        return OutcomeFingerprint(RESULT, digest_bytes({
            "details": details, "text": text,
            "structuredContent": result.get("structuredContent"), "isError": result.get("isError"),
        }))
    return OutcomeFingerprint(RESULT, digest_bytes({"details": details, "text": text}))
