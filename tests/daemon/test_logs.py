"""Decision log lines of one request: the same JSON lines as `logger.log` writes, in one write
while logging is as the daemon sets it up, and one record per line through the logger otherwise."""
from __future__ import annotations

import io
import json
import logging

import pytest

from loopwarden_server import logs


class _Writes(io.StringIO):
    def __init__(self) -> None:
        super().__init__()
        self.writes = 0

    def write(self, text: str) -> int:
        self.writes += 1
        return super().write(text)


@pytest.fixture
def stream():
    root = logging.getLogger()
    handlers, level, previous = root.handlers[:], root.level, logs._handler
    out = _Writes()
    logs.configure("INFO", out)
    yield out
    root.handlers[:], logs._handler = handlers, previous
    root.setLevel(level)


LINES = [(logging.WARNING, "tool call blocked", {"decision_id": "d-1", "seq": 3, "evidence_seqs": [1, 2]}),
         (logging.DEBUG, "loop warning (not announced)", {"decision_id": "d-2", "seq": 4}),
         (logging.ERROR, "run aborted", {"decision_id": "d-3", "seq": 5})]


def _fields(text: str) -> list[dict]:
    return [{k: v for k, v in json.loads(line).items() if k != "ts"} for line in text.splitlines()]


def test_a_batch_is_the_lines_logger_log_writes_in_one_write(stream):
    logging.getLogger().handlers[:] = [logs._handler]  # pytest's own capture handler aside
    logger = logging.getLogger("loopwarden.decisions")
    for level, message, extra in LINES:
        logger.log(level, message, extra=extra)
    one_by_one, writes = stream.getvalue(), stream.writes
    stream.seek(0)
    stream.truncate()
    stream.writes = 0
    logs.log_batch(logger, LINES)
    assert _fields(stream.getvalue()) == _fields(one_by_one)
    assert len(_fields(one_by_one)) == 2, "DEBUG is below the level"
    assert (writes, stream.writes) == (2, 1)


def test_unicode_and_big_integers_are_spelled_as_the_formatter_spells_them(stream):
    logging.getLogger().handlers[:] = [logs._handler]
    logger = logging.getLogger("loopwarden.decisions")
    extra = {"run_id": "r\u00e9\ud800", "seq": 2**70}  # a lone surrogate and > 64 bits: the stdlib encoder
    logger.log(logging.WARNING, "m", extra=extra)
    one = stream.getvalue()
    stream.seek(0)
    stream.truncate()
    logs.log_batch(logger, [(logging.WARNING, "m", extra)])
    assert _fields(stream.getvalue()) == _fields(one)


def test_a_record_factory_gets_records(stream):
    """OpenTelemetry's log correlation swaps the record factory: every line is then a record."""
    logging.getLogger().handlers[:] = [logs._handler]
    made = []
    factory = logging.getLogRecordFactory()

    def counting(*args, **kwargs):
        made.append(args)
        return factory(*args, **kwargs)
    logging.setLogRecordFactory(counting)
    try:
        logs.log_batch(logging.getLogger("loopwarden.decisions"), LINES)
    finally:
        logging.setLogRecordFactory(factory)
    assert len(made) == 2 and len(_fields(stream.getvalue())) == 2


def test_other_handlers_see_every_record(stream):
    seen: list[logging.LogRecord] = []
    handler = logging.Handler()
    handler.emit = seen.append
    logger = logging.getLogger("loopwarden.decisions")
    logger.addHandler(handler)
    try:
        logs.log_batch(logger, LINES)
    finally:
        logger.removeHandler(handler)
    assert [(r.levelno, r.getMessage(), r.decision_id) for r in seen] == [
        (logging.WARNING, "tool call blocked", "d-1"), (logging.ERROR, "run aborted", "d-3")]


def test_without_the_daemons_handler_records_go_as_usual():
    previous, logs._handler = logs._handler, None
    try:
        logger = logging.getLogger("loopwarden.decisions.test")
        seen: list[logging.LogRecord] = []
        handler = logging.Handler()
        handler.emit = seen.append
        logger.addHandler(handler)
        logger.setLevel(logging.INFO)
        logs.log_batch(logger, LINES)
        assert [r.decision_id for r in seen] == ["d-1", "d-3"]
    finally:
        logs._handler = previous


def test_the_text_format_writes_a_batch_as_one_short_line_each():
    """`--log-format text`: the decision lines are records through the text formatter: time,
    level, message, scalar extras as key=value (lists and dicts left to the JSON format)."""
    root = logging.getLogger()
    handlers, level, previous = root.handlers[:], root.level, logs._handler
    out = io.StringIO()
    try:
        assert logs.configure("INFO", out, log_format="text") == "text"
        logs.log_batch(logging.getLogger("loopwarden.decisions"), LINES)
    finally:
        root.handlers[:], logs._handler = handlers, previous
        root.setLevel(level)
    lines = out.getvalue().splitlines()
    assert [line.split(" ", 1)[1] for line in lines] == [
        "WARNING tool call blocked decision_id=d-1 seq=3",
        "ERROR   run aborted decision_id=d-3 seq=5",
    ]


@pytest.mark.parametrize(("isatty", "expected"), [(True, "text"), (False, "json")])
def test_no_format_asked_follows_the_stream(isatty, expected):
    class Stream(io.StringIO):
        def isatty(self) -> bool:
            return isatty

    assert logs.resolve_format(None, Stream()) == expected
    assert logs.resolve_format("json", Stream()) == "json"
