"""Strategies of the differential suite: JSON texts at the edges where JSON libraries differ, and
event sequences over a small alphabet of tools, args and results (so loops really happen)."""
from __future__ import annotations

import json

from hypothesis import strategies as st

# Number spellings: big integers, exponents, trailing zeros, -0, values at the spelling boundaries
# (1e-5 / 1e-4 / 1e16 / 1e21) and at the 64-bit edges orjson refuses past.
number_literals = st.one_of(
    st.integers(min_value=-(2**70), max_value=2**70).map(str),
    st.sampled_from([
        "0", "-0", "-0.0", "0.0", "1.0", "1.50", "1e0", "1E2", "1e-5", "1e-4", "9.99e-5", "1.5e-6", "1e-7",
        "6.1e-05", "1e16", "1e21", "1.5e21", "1e22", "9007199254740993", "18446744073709551615",
        "18446744073709551616", "-9223372036854775808", "-9223372036854775809", "1e20", "1e19", "1e400",
        "2.5e-400", "123456789.123456789", "0.1", "1e308", "5e-324", "-1.25e-10",
    ]),
    st.floats(allow_nan=False, allow_infinity=False).map(repr),
    st.floats(allow_nan=False, allow_infinity=False, min_value=-1e-3, max_value=1e-3).map(lambda f: f"{f:.6e}"),
)

# String bodies (between the quotes): escapes, lone and paired surrogates, control characters.
string_bodies = st.one_of(
    st.text(alphabet=st.characters(blacklist_categories=("Cs",), blacklist_characters='"\\'), max_size=8)
      .map(lambda s: "".join(c if ord(c) >= 0x20 else f"\\u{ord(c):04x}" for c in s)),
    st.sampled_from([
        "\\ud800", "\\udfff", "\\ud83d\\ude00", "\\ud83d", "\\ude00\\ud83d", "\\ud800\\u0041", "\\u00e9",
        "\\n\\t\\\\\\/\\b\\f\\r\\\"", "\\u0000", "\\u001f", "\u2028", "\x7f", "é", "EXTERNAL_UNTRUSTED_CONTENT",
    ]),
)

json_texts = st.recursive(
    st.one_of(number_literals, string_bodies.map(lambda s: f'"{s}"'),
              st.sampled_from(["true", "false", "null"])),
    lambda children: st.one_of(
        st.lists(children, max_size=4).map(lambda items: "[" + ", ".join(items) + "]"),
        # Lists of pairs: duplicate keys stay duplicate, as a hostile or sloppy producer sends them.
        st.lists(st.tuples(string_bodies, children), max_size=4).map(
            lambda pairs: "{" + ",".join(f'"{k}": {v}' for k, v in pairs) + "}"),
    ),
    max_leaves=12,
)


def nested(depth: int) -> str:
    return "[" * depth + "1" + "]" * depth


edge_texts = st.one_of(
    json_texts,
    st.integers(min_value=62, max_value=67).map(nested),
    # NOTE: past Python's recursion limit (~1,000 levels, moved by the caller's stack and by
    # Hypothesis) the Python engine's message drops the word "levels"; both refuse json_too_deep.
    st.sampled_from([nested(900), '{"a": ' * 70 + "1" + "}" * 70, "9" * 4300, "-" + "9" * 4301,
                     "1" * 5000 + ".5", "NaN", "[Infinity]", "-Infinity", " ", "\n[1,\n x]", "[1,]"]),
    # Truncations and junk: the invalid-JSON messages must read the same.
    st.tuples(json_texts, st.integers(min_value=0, max_value=40)).map(lambda t: t[0][: t[1]]),
    st.tuples(json_texts, st.sampled_from(["x", ",", "]", "}", '"', "\\", "\x01"])).map(lambda t: t[0] + t[1]),
)

# --- event sequences -----------------------------------------------------------------------------

TOOLS = ["read", "exec", "process", "message", "update_plan", "command_status", "Bash", "telegram", "ｒｅａｄ",
         "write_stdin", "TaskOutput", "BashOutput", "tasks/get"]
PARAMS = [
    "", "{}", '{"path": "/a"}', '{"path": "/b"}', '{"action": "poll", "sessionId": "s1"}', '{"action": "log"}',
    '{"action": "send", "to": "x"}', '{"plan": [{"step": "a", "status": "pending"}], "explanation": " "}',
    '{"n": 1.0}', '{"n": 1}', '{"big": 18446744073709551616}', '{"s": "\\ud800"}', "[1,", '{"x": 1e-7}',
    '{"session_id": 7, "chars": ""}', '{"session_id": 7, "chars": "y"}',
]
RESULTS = [
    '{"content": [{"type": "text", "text": "ok"}], "details": {"status": "completed", "exitCode": 0, "durationMs": 5}}',
    '{"content": [{"type": "text", "text": "ok"}], "details": {"status": "completed", "exitCode": 0, "durationMs": 9}}',
    '{"content": [{"type": "text", "text": "other"}], "details": {}}',
    '{"details": {"status": "running", "tail": "..."}}',
    '{"details": {"status": "blocked", "deniedReason": "tool-loop"}}',
    '{"details": {"ok": true, "messageId": "m1", "ts": 1}}',
    '{"details": {"ok": true, "messageId": "m2", "ts": 2}}',
    '{"value": 1}', '{"value": 2}', '"plain"', "[1, 2]", "null", "", "{bad",
    '{"content": [{"type": "text", "text": "<<<EXTERNAL_UNTRUSTED_CONTENT id=\\"a1\\">>>page<<<END_EXTERNAL_UNTRUSTED_CONTENT id=\\"a1\\">>>"}]}',
    '{"content": [{"type": "text", "text": "<<<EXTERNAL_UNTRUSTED_CONTENT id=\\"b2\\">>>page<<<END_EXTERNAL_UNTRUSTED_CONTENT id=\\"b2\\">>>"}]}',
    # Wrapped text inside JSON-escaped text (a JSON document as the text), once and twice over.
    json.dumps({"content": [{"type": "text", "text": json.dumps({"t": '<<<EXTERNAL_UNTRUSTED_CONTENT id="c3">>>page'
                                                                     '<<<END_EXTERNAL_UNTRUSTED_CONTENT id="c3">>>'})}]}),
    json.dumps({"content": [{"type": "text", "text": json.dumps({"t": '<<<EXTERNAL_UNTRUSTED_CONTENT id="d4">>>page'
                                                                     '<<<END_EXTERNAL_UNTRUSTED_CONTENT id="d4">>>'})}]}),
    json.dumps({"content": [{"type": "text", "text": json.dumps(json.dumps({"t": '<<<EXTERNAL_UNTRUSTED_CONTENT id="e5">>>p'
                                                                                '<<<END_EXTERNAL_UNTRUSTED_CONTENT id="e5">>>'}))}]}),
    # Escaped markers that are no pair, each with two ids (alike only if wrongly paired): the
    # opener and closer in two string fields, 2 backslashes a quote (no escape depth), and a
    # quote escaped once between markers escaped twice (it ends their encoded string).
    *(json.dumps({"content": [{"type": "text", "text": json.dumps({"a": f'x<<<EXTERNAL_UNTRUSTED_CONTENT id="{i}">>>',
                                                                   "b": f'<<<END_EXTERNAL_UNTRUSTED_CONTENT id="{i}">>>y'})}]})
      for i in ("f6", "f7")),
    *(json.dumps({"content": [{"type": "text", "text": f'<<<EXTERNAL_UNTRUSTED_CONTENT id=\\\\"{i}\\\\">>>p'
                                                       f'<<<END_EXTERNAL_UNTRUSTED_CONTENT id=\\\\"{i}\\\\">>>'}]})
      for i in ("g8", "g9")),
    *(json.dumps({"content": [{"type": "text", "text": f'<<<EXTERNAL_UNTRUSTED_CONTENT id=\\\\\\"{i}\\\\\\">>>p\\"q'
                                                       f'<<<END_EXTERNAL_UNTRUSTED_CONTENT id=\\\\\\"{i}\\\\\\">>>'}]})
      for i in ("h1", "h2")),
    '{"content": [], "structuredContent": {"x": 1}, "isError": false}',
    '{"details": {"n": 1.5e-6}}', '{"details": {"n": 18446744073709551616}}',
    '{"chunk_id": "a1", "wall_time_seconds": 5.1, "session_id": 7, "output": ""}',
    '{"chunk_id": "b2", "wall_time_seconds": 4.9, "session_id": 7, "output": ""}',
    '{"content": [{"type": "text", "text": " Chunk ID: 9\\nWall time: 5 s\\nOutput:\\nWall time: 1\\n"}]}',
    '"<status>running</status><timestamp>1</timestamp>x<timestamp>2"',
]
ERRORS = ["boom", "Unknown tool: frobnicate", 'tool "ghost" not found', "Tool Ghost is not available", "  "]


@st.composite
def palettes(draw):
    """A few calls and outcomes for one example: drawn from often enough, they loop."""
    return {
        "tools": draw(st.lists(st.sampled_from(TOOLS), min_size=1, max_size=3, unique=True)),
        "params": draw(st.lists(st.sampled_from(PARAMS), min_size=1, max_size=2, unique=True)),
        "results": draw(st.lists(st.sampled_from(RESULTS), min_size=1, max_size=2, unique=True)),
        "errors": draw(st.lists(st.sampled_from(ERRORS), min_size=1, max_size=1)),
    }


WILD = {"tools": TOOLS, "params": PARAMS, "results": RESULTS, "errors": ERRORS}


@st.composite
def events(draw, palette=None):
    """One event as a dict (the conformance runner's vocabulary, flattened)."""
    if palette is None or draw(st.integers(min_value=0, max_value=9)) == 0:
        palette = WILD
    kind = draw(st.sampled_from(["tool_call"] * 8 + ["tool_outcome"] * 8 + ["compaction_retry", "user_turn", "run_end", "none"]))
    event = {"run_id": draw(st.sampled_from(["r1"] * 6 + ["r2", " r1 ", ""])),
             "agent_id": draw(st.sampled_from(["", "", "", "strict", "other"])),
             "seq": draw(st.sampled_from([0, 0, 1, 2, 3]) | st.integers(min_value=4, max_value=10_000)),
             "kind": kind}
    if kind in ("tool_call", "tool_outcome"):
        event["tool_name"] = draw(st.sampled_from(palette["tools"]))
        event["params_json"] = draw(st.sampled_from(palette["params"]))
        event["tool_call_id"] = draw(st.sampled_from(["", "", "", "c1", "c2"]))
    if kind == "user_turn":
        event["prompt_id"] = draw(st.sampled_from(["", "p1", "p2"]))
    if kind == "tool_outcome":
        which = draw(st.sampled_from(["result"] * 6 + ["error", "none"]))
        if which == "result":
            event["result_json"] = draw(st.sampled_from(palette["results"]))
        elif which == "error":
            event["error"] = draw(st.sampled_from(palette["errors"]))
    return event


@st.composite
def event_sequences(draw, min_size=1, max_size=40):
    """Mostly call + outcome pairs of one palette, with stray events of every kind between."""
    palette = draw(palettes())
    sequence = []
    for _ in range(draw(st.integers(min_value=min_size, max_value=max_size))):
        call = draw(events(palette))
        if call.get("kind") == "tool_call" and draw(st.integers(min_value=0, max_value=4)):
            outcome = dict(call, kind="tool_outcome", seq=call["seq"] + 1 if call["seq"] else 0)
            outcome.pop("result_json", None)
            if draw(st.integers(min_value=0, max_value=5)):
                outcome["result_json"] = draw(st.sampled_from(palette["results"]))
            else:
                outcome["error"] = draw(st.sampled_from(palette["errors"]))
            sequence += [call, outcome]
        else:
            sequence.append(call)
    return sequence


@st.composite
def scenario_configs(draw):
    """A config file: random thresholds (W < C < G), detectors and extensions, and one agent block."""
    warning = draw(st.integers(min_value=1, max_value=5))
    critical = warning + draw(st.integers(min_value=1, max_value=4))
    block = {
        "enabled": draw(st.sampled_from([True, True, True, None, False])),
        "historySize": draw(st.integers(min_value=2, max_value=12)),
        "warningThreshold": warning,
        "criticalThreshold": critical,
        "globalCircuitBreakerThreshold": critical + draw(st.integers(min_value=1, max_value=4)),
        "unknownToolThreshold": draw(st.integers(min_value=1, max_value=4)),
        "detectors": {name: draw(st.booleans()) for name in ("genericRepeat", "knownPollNoProgress", "pingPong")},
        "postCompactionGuard": {"windowSize": draw(st.integers(min_value=1, max_value=4))},
    }
    if block["enabled"] is None:
        del block["enabled"]
    extensions = {}
    if draw(st.booleans()):
        extensions["abortAfterBlocks"] = draw(st.integers(min_value=1, max_value=3))
    if draw(st.booleans()):
        extensions["runWideBreaker"] = {"threshold": draw(st.integers(min_value=2, max_value=6))}
    if draw(st.booleans()):
        extensions["shadowMode"] = True
    if draw(st.booleans()):
        extensions["argumentChurn"] = {"warnAt": 2, "blockAt": draw(st.integers(min_value=3, max_value=5))}
    if draw(st.booleans()):
        extensions["errorRepeat"] = {"threshold": draw(st.integers(min_value=2, max_value=4))}
    if draw(st.booleans()):
        extensions["pingPongNeedsAnswers"] = True
    config = {"tools": {"loopDetection": block},
              "agents": {"list": [{"id": "strict", "tools": {"loopDetection": {"enabled": True, "historySize": 4}}}]}}
    if extensions:
        config["loopwarden"] = extensions
    if draw(st.booleans()):
        config["loopwarden"] = {**config.get("loopwarden", {}), "providerSendTools": ["telegram"]}
    return json.dumps(config)
