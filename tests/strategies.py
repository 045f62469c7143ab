"""Named Hypothesis strategies shared by the property tests."""
from __future__ import annotations

import json
import random

from hypothesis import strategies as st

# JSON scalars as a runner would send them. Floats are finite (JSON has no NaN/Infinity).
json_scalars = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(min_value=-(2**63), max_value=2**63),
    st.floats(allow_nan=False, allow_infinity=False),
    st.text(max_size=20),
)

json_values = st.recursive(
    json_scalars,
    lambda children: st.one_of(
        st.lists(children, max_size=5),
        st.dictionaries(st.text(max_size=8), children, max_size=5),
    ),
    max_leaves=25,
)

json_objects = st.dictionaries(st.text(max_size=8), json_values, max_size=6)

tool_names = st.sampled_from(["read", "write", "exec", "list", "process", "message", "gateway", "search"])


def reorder_keys(value, seed: int):
    """The same JSON value with every object's keys in another order."""
    rng = random.Random(seed)

    def walk(node):
        if isinstance(node, dict):
            items = list(node.items())
            rng.shuffle(items)
            return {key: walk(item) for key, item in items}
        if isinstance(node, list):
            return [walk(item) for item in node]
        return node

    return walk(value)


exec_statuses = st.sampled_from(["completed", "failed"])
exec_outputs = st.text(max_size=40)
exit_codes = st.integers(min_value=0, max_value=255)

# What varies without meaning progress on an exec result.
exec_volatile = st.fixed_dictionaries({
    "durationMs": st.integers(min_value=0, max_value=10**7),
    "pid": st.integers(min_value=1, max_value=2**22),
    "cwd": st.text(min_size=1, max_size=20),
    "sessionId": st.text(min_size=1, max_size=12),
    "startedAt": st.integers(min_value=0, max_value=2**40),
})

volatile_ids = st.text(alphabet="abcdef0123456789-", min_size=1, max_size=24)
send_volatile = st.fixed_dictionaries({
    "messageId": volatile_ids,
    "runId": volatile_ids,
    "ts": st.integers(min_value=0, max_value=2**40),
    "sentAt": volatile_ids,
    "receipt": st.fixed_dictionaries({"platformMessageId": volatile_ids}),
})


@st.composite
def event_scripts(draw, max_events: int = 40):
    """A run's script of calls and outcomes over a small vocabulary, so loops really happen."""
    steps = []
    for _ in range(draw(st.integers(min_value=0, max_value=max_events))):
        tool = draw(st.sampled_from(["read", "list", "process"]))
        params = draw(st.sampled_from([{"path": "/a"}, {"path": "/b"}, {"action": "poll", "sessionId": "s"}]))
        kind = draw(st.sampled_from(["call", "outcome", "done", "done", "veto"]))
        result = draw(st.sampled_from(["same", "same", "other", "error"]))
        steps.append((kind, tool, params, result))
    return steps


def as_json(value) -> str:
    return json.dumps(value)
