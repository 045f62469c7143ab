"""What the adapter tests share: the looping script's numbers, counter deltas read from a real
scrape, the daemon's own messages for the pattern, and an address nothing listens on."""
from __future__ import annotations

import socket
from dataclasses import dataclass

from prometheus_client.parser import text_string_to_metric_families

REPEATS = 25  # the model asks for the same call this many times
CRITICAL = 20  # the daemon's default critical threshold: runs 1..20 happen, 21.. are blocked
TOOL, PARAMS, RESULT = "read", {"path": "/etc/hosts"}, "same"


def counter(text: str, name: str, **labels: str) -> float:
    """The sum of a counter's samples whose labels include `labels` (other labels, such as a
    tenant, may come and go)."""
    wanted = labels.items()
    return sum(sample.value for family in text_string_to_metric_families(text) for sample in family.samples
               if sample.name == name and wanted <= sample.labels.items())


@dataclass(frozen=True)
class Counters:
    warnings: float
    blocks: float
    aborts: float

    @classmethod
    def scrape(cls, daemon) -> Counters:
        text = daemon.scrape()
        return cls(counter(text, "loopwarden_warnings_total", detector="generic_repeat"),
                   counter(text, "loopwarden_blocks_total", detector="generic_repeat"),
                   counter(text, "loopwarden_guard_aborts_total"))

    def __sub__(self, earlier: Counters) -> Counters:
        return Counters(self.warnings - earlier.warnings, self.blocks - earlier.blocks, self.aborts - earlier.aborts)


@dataclass(frozen=True)
class Messages:
    warning: str  # the announced warning at the 11th identical call
    block: str  # the block at the 21st


def daemon_messages(client, run_id: str) -> Messages:
    """What the daemon itself says for the looping pattern, driven straight through the client
    (it moves the counters: call it after the last scrape)."""
    warning = block = ""
    for index in range(1, CRITICAL + 2):
        verdict = client.tool_call(run_id, TOOL, PARAMS, tool_call_id=f"reference-{index}")
        if verdict.announce and verdict.action.value == "warn":
            warning = verdict.message
        if verdict.action.value == "block":
            block = verdict.message
        else:
            client.tool_outcome(run_id, TOOL, PARAMS, result=RESULT, tool_call_id=f"reference-{index}")
    client.run_end(run_id)
    assert warning and block, "the daemon's config no longer warns and blocks at the default thresholds"
    return Messages(warning, block)


def abort_run(client, run_id: str) -> str:
    """End a run the way the post-compaction guard does (three identical outcomes after a
    compaction); returns the abort message. Later calls of the run are ABORTed before they run."""
    client.compaction_retry(run_id)
    for index in range(3):
        client.tool_call(run_id, TOOL, PARAMS, tool_call_id=f"pre-{index}")
        verdict = client.tool_outcome(run_id, TOOL, PARAMS, result=RESULT, tool_call_id=f"pre-{index}")
    assert "abort" == verdict.action.value
    return verdict.message


def dead_target() -> str:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return f"127.0.0.1:{probe.getsockname()[1]}"
