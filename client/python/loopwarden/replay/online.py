"""A replay judge backed by a running daemon: each event dict is sent, the daemon's verdict observed."""
from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from .._wire import event_from_dict
from ..client import LoopwardenClient
from .observed import Judge, Observed


def with_run_prefix(data: Mapping[str, Any], run_prefix: str) -> Mapping[str, Any]:
    """The event with its run id prefixed (replay a trace twice without mixing runs)."""
    if run_prefix and data.get("run_id"):
        return {**data, "run_id": run_prefix + data["run_id"]}
    return data


def daemon_judge(client: LoopwardenClient, run_prefix: str = "") -> Judge:
    def judge(data: Mapping[str, Any]) -> Observed:
        verdict = client.evaluate([event_from_dict(with_run_prefix(data, run_prefix))])[0]
        shadow = verdict.shadow_action
        return Observed(verdict.seq, verdict.run_id, verdict.action.value, verdict.detector, verdict.level,
                        verdict.count, verdict.message, verdict.error_code, verdict.tool_name,
                        shadow.value if shadow is not None else "")

    return judge
