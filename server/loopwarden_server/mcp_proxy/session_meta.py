"""The JSON-RPC fields the proxy reads, validated, and the `_meta` keys it understands.

A message comes from a peer the proxy does not control, and the SDK's envelope types check only
the envelope (`id` a string or an integer, `params` an object): whatever the proxy reads inside
`params` is checked here, so a bad value is that message's error (a JSON-RPC error naming the
field, or for a notification a dropped message and a log line), never an exception in the relay.

The proxy's own `_meta` keys (prefix `io.loopwarden/`, as MCP reserves prefixed names for
implementations) on a client's request:
- `io.loopwarden/parentRunId` (a non-empty string), on `initialize` or on a `tools/call`: this
  session's run is a child of that run (a sub-agent). The first one given fixes it.
- `io.loopwarden/userTurn` (a boolean), on a `tools/call`: `true` says a person gave the agent a
  new instruction since its last call: the proxy sends the run a `user_turn` before judging it.
And on the proxy's answer to `initialize`: `io.loopwarden/runId`, the id of the session's run
(what a sub-agent's session names as its parent).
"""
from __future__ import annotations

import json
import re
from typing import Any

from loopwarden import daemon_limits
from mcp_types import INVALID_PARAMS, INVALID_REQUEST

META_PREFIX = "io.loopwarden/"
PARENT_RUN_ID = META_PREFIX + "parentRunId"
USER_TURN = META_PREFIX + "userTurn"
RUN_ID = META_PREFIX + "runId"
# The daemon refuses longer run ids (--max-run-id-chars' default); said here in the field's words.
MAX_RUN_ID_CHARS = daemon_limits.MAX_RUN_ID_CHARS.default

# The form an ASK shows (elicitation, form mode): the message says what loops and why; accepting
# runs the call once, or with `always` checked from now on (a standing exemption for this agent,
# tool and arguments). Declining or cancelling refuses it.
ASK_SCHEMA: dict[str, Any] = {
    "type": "object",
    "properties": {
        "always": {
            "type": "boolean",
            "title": "Always allow",
            "description": "Also allow this tool with these same arguments from now on, not only this once",
            "default": False,
        },
    },
}


class MetaError(ValueError):
    """A field the proxy reads has a value it cannot use; the message names the field."""


def hashable_id(value: Any) -> str | int | None:
    """A JSON-RPC id the proxy can key on (a string or an integer, not a boolean), else None."""
    if isinstance(value, str) or (isinstance(value, int) and not isinstance(value, bool)):
        return value
    return None


def meta_of(params: Any) -> dict[str, Any]:
    """`params._meta`, {} when absent; MetaError when it is not an object."""
    if not isinstance(params, dict) or params.get("_meta") is None:
        return {}
    meta = params["_meta"]
    if not isinstance(meta, dict):
        raise MetaError(f"params._meta must be an object, got {type(meta).__name__}")
    return meta


def progress_token(meta: dict[str, Any]) -> str | int | None:
    """`_meta.progressToken` (a string or an integer, the spec's ProgressToken), None when absent."""
    token = meta.get("progressToken")
    if token is None:
        return None
    if hashable_id(token) is None:
        raise MetaError(f"params._meta.progressToken must be a string or an integer, got {type(token).__name__}")
    return token


def parent_run_id(meta: dict[str, Any]) -> str:
    """`_meta["io.loopwarden/parentRunId"]`, "" when absent."""
    value = meta.get(PARENT_RUN_ID)
    if value is None:
        return ""
    if not isinstance(value, str) or not value.strip():
        raise MetaError(f"params._meta[{PARENT_RUN_ID!r}] must be a non-empty string (a run id)")
    if len(value) > MAX_RUN_ID_CHARS:
        raise MetaError(f"params._meta[{PARENT_RUN_ID!r}] is {len(value)} characters, at most {MAX_RUN_ID_CHARS}")
    return value


def user_turn(meta: dict[str, Any]) -> bool:
    """`_meta["io.loopwarden/userTurn"]`, False when absent."""
    value = meta.get(USER_TURN)
    if value is None:
        return False
    if not isinstance(value, bool):
        raise MetaError(f"params._meta[{USER_TURN!r}] must be true or false, got {type(value).__name__}")
    return value


def accepts_elicitation(params: Any) -> bool:
    """Whether an `initialize` request's client can be asked with a form: its capabilities have
    `elicitation`, either empty (before 2025-11-25: form only) or with `form`."""
    capabilities = params.get("capabilities") if isinstance(params, dict) else None
    elicitation = capabilities.get("elicitation") if isinstance(capabilities, dict) else None
    if not isinstance(elicitation, dict):
        return False
    return not elicitation or isinstance(elicitation.get("form"), dict)


def wants_always(answer: Any) -> tuple[bool, bool]:
    """(approved, always) of an ElicitResult: `accept` approves, with `content.always` true for
    always; `decline`, `cancel` or anything unreadable is a denial."""
    if not isinstance(answer, dict) or answer.get("action") != "accept":
        return False, False
    content = answer.get("content")
    return True, isinstance(content, dict) and content.get("always") is True


# The largest message a client may send the proxy (a stdin line, an HTTP POST body). A larger one
# is answered at once with an error (INVALID_REQUEST, its id read from its head when it has one)
# and never read whole, so one message cannot hold the proxy's memory; MCP requests are small
# (tool arguments), the large payloads (results, resources) come from the server.
MAX_MESSAGE_BYTES = 32 * 1024 * 1024
# Where a too-large message's id is looked for: JSON-RPC senders put it near the top.
ID_PREFIX_BYTES = 64 * 1024
_ID = re.compile(rb'"id"\s*:\s*("(?:[^"\\]|\\.){0,256}"|-?\d{1,18})\s*[,}]')


def too_large_error(head: bytes, size: int) -> dict[str, Any]:
    """The JSON-RPC error for a message of `size` bytes or more whose first bytes are `head`:
    with the request's id when its head names one (else null, as JSON-RPC says for an
    unreadable request)."""
    found = _ID.search(head[:ID_PREFIX_BYTES])
    request_id: Any = None
    if found:
        try:
            request_id = json.loads(found.group(1))
        except ValueError:
            request_id = None
    return {"jsonrpc": "2.0", "id": request_id, "error": {
        "code": INVALID_REQUEST, "message": f"the message is too large for loopwarden mcp-proxy: at least "
                                           f"{size} bytes, at most {MAX_MESSAGE_BYTES}"}}


def _valid_id(value: Any) -> bool:
    return isinstance(value, str) or (isinstance(value, int) and not isinstance(value, bool))


def invalid_message(message: Any) -> dict[str, Any] | None:
    """The JSON-RPC error for one decoded client message that is no JSON-RPC message the proxy can
    relay, None for any other (a batch, a list, is left to the transport). Checked before the
    SDK's envelope types, which read a request with a list `id` as a notification (accepted, 202,
    never answered) or drop it. Invalid Request (-32600, with id null when the id itself is what
    is wrong, as JSON-RPC says): not an object, `jsonrpc` not "2.0", an `id` that is no string or
    integer, no `method` (nor a result or error), a `method` that is no string. Invalid params
    (-32602, with the request's id): `params` not an object, a `tools/call` naming no tool."""
    if isinstance(message, list):
        return None
    if not isinstance(message, dict):
        return _rpc_error(None, INVALID_REQUEST, f"Invalid Request: a JSON-RPC message is an object, "
                                                 f"got {type(message).__name__}")
    request_id = message.get("id")
    has_id = "id" in message
    answerable = request_id if _valid_id(request_id) else None
    if message.get("jsonrpc") != "2.0":
        return _rpc_error(answerable, INVALID_REQUEST, 'Invalid Request: "jsonrpc" must be "2.0"')
    if "method" not in message:
        if "result" in message or "error" in message:
            # A response; an error response may carry id null (the peer could not read a request).
            if _valid_id(request_id) or (request_id is None and "error" in message):
                return None
            return _rpc_error(None, INVALID_REQUEST, f"Invalid Request: id must be a string or an integer, "
                                                     f"got {_kind(request_id)}")
        return _rpc_error(answerable, INVALID_REQUEST, "Invalid Request: no method (nor a result or error)")
    if has_id and not _valid_id(request_id):
        return _rpc_error(None, INVALID_REQUEST, f"Invalid Request: id must be a string or an integer, "
                                                 f"got {_kind(request_id)}")
    method = message["method"]
    if not isinstance(method, str):
        return _rpc_error(answerable, INVALID_REQUEST, f"Invalid Request: method must be a string, got {_kind(method)}")
    params = message.get("params")
    if not has_id:
        return None  # a notification: never answered (JSON-RPC); its params are the relay's to check
    if "params" in message and not isinstance(params, dict):
        return _rpc_error(request_id, INVALID_PARAMS, f"Invalid params: params must be an object, got {_kind(params)}")
    if method == "tools/call" and not (isinstance(params, dict) and isinstance(params.get("name"), str)
                                       and params["name"]):
        return _rpc_error(request_id, INVALID_PARAMS, "Invalid params: tools/call needs params.name, the tool's name")
    return None


def _kind(value: Any) -> str:
    return "null" if value is None else {dict: "an object", list: "a list", bool: "a boolean", float: "a number",
                                         str: "a string", int: "an integer"}.get(type(value), type(value).__name__)


def _rpc_error(request_id: Any, code: int, message: str) -> dict[str, Any]:
    return {"jsonrpc": "2.0", "id": request_id, "error": {"code": code, "message": message}}
