"""`loopwarden inspect RUN`: what a daemon holds for one run, as a summary for a person (or the
raw view with --json).

The agent is spelled as the metrics spell it: a run whose events carry no agent id is the
`default` agent, and the global settings apply to it.
"""
from __future__ import annotations

import argparse
import dataclasses
import json
from typing import Any

from ..connection import add_connection_arguments
from ..types import RunInspection, Verdict
from .common import call_daemon

DEFAULT_AGENT = "default"  # the metrics' `agent` label for a run without an agent id
DEFAULT_RECORDS = 10
HASH_CHARS = 12
MAX_EVIDENCE_SEQS = 12

# Effective config keys shown on the "config" line, with the letters docs/glossary.md defines.
_THRESHOLDS = (("history_size", "history"), ("warning_threshold", "W"), ("critical_threshold", "C"),
               ("unknown_tool_threshold", "U"), ("global_circuit_breaker_threshold", "G"))
_DETECTORS = ("generic_repeat", "known_poll_no_progress", "ping_pong")
_SHOWN = {"enabled", "post_compaction_window_size", *(key for key, _ in _THRESHOLDS), *_DETECTORS}


def add(commands) -> None:
    inspect = commands.add_parser(
        "inspect", help="summarise a run the daemon holds: agent, guard state, blocks, its last records, "
                        "recent verdicts and their evidence (--json: the raw view)")
    inspect.add_argument("run_id", metavar="RUN_ID")
    inspect.add_argument("--json", action="store_true", help="print the daemon's whole view of the run as JSON")
    inspect.add_argument("--records", type=int, default=DEFAULT_RECORDS, metavar="N",
                         help=f"how many of the last records to list (default {DEFAULT_RECORDS}; 0: all)")
    add_connection_arguments(inspect)
    inspect.set_defaults(handler=run)


def run(args: argparse.Namespace) -> int:
    from ..types import RunNotFound

    inspection, failed = call_daemon(args, lambda client: client.inspect(args.run_id), not_found=RunNotFound)
    if failed is not None:
        return failed
    if args.json:
        print(json.dumps(dataclasses.asdict(inspection), indent=2, default=str))
    else:
        print("\n".join(summary(inspection, args.records)))
    return 0


def effective_agent(agent_id: str) -> str:
    """The metrics' spelling when the daemon did not send it (an older daemon): no id is default."""
    return agent_id.strip() or DEFAULT_AGENT


def _on_off(value: object) -> str:
    return "on" if value else "off"


def config_lines(config: dict) -> list[str]:
    enabled: Any = config.get("enabled")  # true, false or absent (None), as the daemon sent it
    detection = {True: "detection on", False: "detection off"}.get(
        enabled, "detection unset (post-compaction guard only)")
    thresholds = " · ".join(f"{name} {config[key]}" for key, name in _THRESHOLDS if key in config)
    detectors = ", ".join(name for name in _DETECTORS if config.get(name)) or "none"
    lines = [f"{detection} · {thresholds}",
             f"detectors: {detectors} · post-compaction window {config.get('post_compaction_window_size', '-')}"]
    # Extensions and anything newer: listed when on (non-zero, true, non-empty), so the line stays short.
    extras = [key if value is True else f"{key} {value}"
              for key, value in config.items() if key not in _SHOWN and value not in (0, False, "", None)]
    lines.append("extensions: " + (", ".join(extras) if extras else "none on"))
    return lines


def _table(rows: list[tuple[str, ...]], right: frozenset[int] = frozenset()) -> list[str]:
    widths = [max(len(row[i]) for row in rows) for i in range(len(rows[0]))]
    return ["  ".join(cell.rjust(widths[i]) if i in right else cell.ljust(widths[i])
                      for i, cell in enumerate(row)).rstrip() for row in rows]


def _short(digest: str) -> str:
    return digest[:HASH_CHARS] if digest else ""


def records_lines(inspection: RunInspection, limit: int) -> list[str]:
    records = inspection.records
    if not records:
        return ["records   none held"]
    shown = records if limit <= 0 else records[-limit:]
    which = "all" if len(shown) == len(records) else f"the last {len(shown)}"
    rows: list[tuple[str, ...]] = [("seq", "tool", "args", "result", "call id", "note")]
    for record in shown:
        rows.append((str(record.seq), record.tool_name, _short(record.args_hash),
                     _short(record.result_hash) or "(pending)", record.tool_call_id,
                     f"unknown tool {record.unknown_tool_name}" if record.unknown_tool_name else ""))
    return ([f"records   {len(records)} held; {which}, oldest first:"]
            + ["  " + line for line in _table(rows, frozenset({0}))])


def _evidence(verdict: Verdict) -> str:
    seqs = verdict.evidence_seqs
    if not seqs:
        return ""
    listed = ", ".join(str(seq) for seq in seqs[:MAX_EVIDENCE_SEQS])
    if len(seqs) > MAX_EVIDENCE_SEQS:
        listed += f", … {seqs[-1]}"
    text = f"evidence: seqs {listed} ({len(seqs)} records)"
    if verdict.loop_started_seq:
        text += f", loop started at seq {verdict.loop_started_seq}"
    if verdict.evidence_call_ids:
        text += f", pending call ids {', '.join(verdict.evidence_call_ids)}"
    return text


def verdict_lines(verdicts: list[Verdict]) -> list[str]:
    if not verdicts:
        return ["verdicts  no warning, block or abort yet"]
    lines = [f"verdicts  the last {len(verdicts)} warnings, blocks and aborts, oldest first:"]
    for verdict in verdicts:
        action = verdict.action.value.upper()
        if verdict.shadow_action is not None:
            action += f" (shadow: {verdict.shadow_action.value.upper()})"
        head = [f"seq {verdict.seq}", action, verdict.detector or "-"]
        if verdict.count:
            head.append(f"count {verdict.count}")
        if verdict.tool_name:
            head.append(f"tool {verdict.tool_name}")
        if verdict.error_code:
            head.append(f"[{verdict.error_code}]")
        if verdict.decision_id:
            head.append(f"decision {verdict.decision_id}")
        lines.append("  " + "  ".join(head))
        for detail in (_evidence(verdict), verdict.message):
            if detail:
                lines.append("      " + detail)
    return lines


def tree_lines(inspection: RunInspection, shown_children: int = 5) -> list[str]:
    """The run's place in its run tree and what the tree spent; none from a daemon without trees."""
    if not inspection.root_run_id:
        return []
    children = inspection.children
    names = ", ".join(children[:shown_children]) + (", …" if len(children) > shown_children else "")
    place = f"root {inspection.root_run_id} · depth {inspection.depth}"
    if inspection.parent_run_id:
        place += f" · parent {inspection.parent_run_id}"
    place += f" · {len(children)} children" + (f" ({names})" if children else "")
    tree, run = inspection.tree_totals, inspection.run_totals
    spent = (f"tree: {tree.tool_calls} calls, {tree.tool_ms / 1000:g} tool s, "
             f"{tree.input_tokens + tree.output_tokens} tokens, ${tree.cost_usd:g}, {tree.runs} runs"
             f" · this run: {run.tool_calls} calls")
    return [f"tree      {place}", f"spent     {spent}"]


def output_lines(inspection: RunInspection) -> list[str]:
    """The detectors of loops without tool calls' counts, when any is not 0 (none otherwise)."""
    s = inspection.output_streaks
    if not s.any:
        return []
    counts = [(s.messages, "same message"), (s.thoughts, "same thought"), (s.final_answers, "same final answer"),
              (s.compactions, "compactions"), (s.stop_continuations, "stop-hook continuations"),
              (s.final_answer_turns, "turns ending in the same answer")]
    return ["outputs   " + " · ".join(f"{what} {n}" for n, what in counts if n) + " (in a row, no new tool result)"]


def summary(inspection: RunInspection, records: int = DEFAULT_RECORDS) -> list[str]:
    """The run as text lines: who, guard, blocks, config, the last records, the recent verdicts."""
    agent = inspection.agent_label or effective_agent(inspection.agent_id)
    if not inspection.agent_id.strip():
        agent_note = " (no agent id: the global settings)"
    elif agent != inspection.agent_id.strip():
        agent_note = f" (agent id {inspection.agent_id.strip()!r} is not in the config: the global settings)"
    else:
        agent_note = ""
    if inspection.guard_armed:
        guard = f"armed: {inspection.guard_observed} of {inspection.guard_window_size} observed"
    else:
        guard = "not armed"
    aborted = f"yes ({inspection.abort_error_code})" if inspection.aborted else "no"
    config = config_lines(inspection.effective_config)
    lines = [
        f"run       {inspection.run_id}",
        f"agent     {agent}{agent_note}",
        f"events    {inspection.events_evaluated} evaluated",
        f"guard     {guard}",
        f"blocks    {inspection.blocks}",
        f"aborted   {aborted}",
        *tree_lines(inspection),
        *output_lines(inspection),
        f"config    {config[0]}",
        *(f"          {line}" for line in config[1:]),
        "",
        *records_lines(inspection, records),
        "",
        *verdict_lines(inspection.recent_verdicts),
    ]
    return lines
