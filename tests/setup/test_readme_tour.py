"""The README's one-minute tour works when pasted: its shell blocks, read out of README.md as
written, run in order in one shell against a daemon started on the embedded default config (as
`make serve` starts it), and what each prints matches the output block the README shows after it.

The commands run from a directory laid out like a checkout after `make serve`: `.venv` is the
environment running the tests and `examples` the repository's, so `.venv/bin/loopwarden` and
`examples/looping-trace.jsonl` are found exactly as the README spells them."""
from __future__ import annotations

import os
import pathlib
import re
import subprocess
import sys

import pytest

from tests.support.daemon import running_daemon

REPO = pathlib.Path(__file__).resolve().parents[2]
README = REPO / "README.md"
VENV = pathlib.Path(sys.prefix)
SECTION = "## A one-minute tour"
# An expected-output line may end in a remark for the reader: two or more spaces, then "(...)".
REMARK = re.compile(r"\s{2,}\(.*\)$")

pytestmark = [pytest.mark.daemon, pytest.mark.skipif(not (VENV / "bin" / "loopwarden").exists(),
                                reason="the tests do not run from a venv with the daemon installed")]


def tour() -> list[tuple[str, list[str]]]:
    """(shell block, the output block shown right after it, if any) in README order."""
    text = README.read_text(encoding="utf-8")
    start = text.index(SECTION)
    end = text.index("\n## ", start + len(SECTION))
    blocks = re.findall(r"^```(\w*)\n(.*?)^```$", text[start:end], re.MULTILINE | re.DOTALL)
    steps: list[tuple[str, list[str]]] = []
    for language, body in blocks:
        if language == "sh":
            steps.append((body, []))
        elif language == "" and steps and not steps[-1][1]:
            steps[-1] = (steps[-1][0], body.splitlines())
    return steps


def _fragments(expected: str) -> list[str]:
    """The literal pieces of an expected line: its remark dropped, split at the ellipses."""
    return [piece.strip() for piece in REMARK.sub("", expected).split("…") if piece.strip()]


def assert_shows(expected: list[str], output: str) -> None:
    """Each expected line that is not just "…" matches an output line, in order: its pieces
    appear in that line in order, the first at the line's start (leading spaces aside)."""
    lines = output.splitlines()
    at = 0
    for wanted in expected:
        pieces = _fragments(wanted)
        if not pieces:
            continue
        for index in range(at, len(lines)):
            line = lines[index].strip()
            if not line.startswith(pieces[0]):
                continue
            position = len(pieces[0])
            for piece in pieces[1:]:
                position = line.find(piece, position)
                if position < 0:
                    break
                position += len(piece)
            else:
                at = index + 1
                break
        else:
            raise AssertionError(f"README shows {wanted!r}, not printed (in order) by the tour:\n{output}")


def test_the_tour_has_the_three_commands_the_readme_promises():
    commands = [step for step, _ in tour()]
    assert len(commands) == 3, commands
    assert "loopwarden replay examples/looping-trace.jsonl" in commands[0]
    assert "/metrics" in commands[1]
    assert ".venv/bin/loopwarden inspect demo-repeat" in commands[2]
    assert all(expected for _, expected in tour()), "every command is followed by what it prints"


def test_the_tour_as_pasted(tmp_path):
    steps = tour()
    (tmp_path / ".venv").symlink_to(VENV)
    (tmp_path / "examples").symlink_to(REPO / "examples")
    # One shell for the whole tour (the first block's export holds for the next ones); a marker
    # after each block carries its exit status and splits the output by block.
    script = "".join(f"{body}\necho \"@@step {number} exit $?@@\"\n" for number, (body, _) in enumerate(steps))
    with running_daemon() as daemon:
        env = {key: value for key, value in os.environ.items()
               if not key.startswith("LOOPWARDEN_") and key not in ("GRPC_PORT", "METRICS_PORT", "HOOKS_PORT")}
        env.update(GRPC_PORT=daemon.grpc_target.rsplit(":", 1)[1], METRICS_PORT=str(daemon.metrics_port))
        done = subprocess.run(["bash", "-c", script], cwd=tmp_path, env=env, capture_output=True, text=True,
                              timeout=120)
    parts = re.split(r"^@@step (\d+) exit (\d+)@@$\n?", done.stdout, flags=re.MULTILINE)
    outputs, statuses = parts[0::3][:len(steps)], parts[2::3]
    assert statuses == ["0"] * len(steps), f"{statuses}\n{done.stdout}\n{done.stderr}"
    for (_body, expected), output in zip(steps, outputs):
        assert_shows(expected, output)


def test_the_matcher_fails_on_a_line_the_tour_does_not_print():
    with pytest.raises(AssertionError):
        assert_shows(["summary: abort=9 …"], "summary: abort=2, allow=39\n")
    assert_shows(["a …      (a remark)", "…", "c … e"], "a b\nx\nc d e\n")
