"""What a new level of a deep run tree costs as the tree grows: 10,000 runs, each the child of the
one before (runTree.maxDepth raised to 20,000), through the compiled core as the daemon calls it;
the seconds per 1,000 levels at each depth, and the last block against the first in the same run.

Run: .venv/bin/python bench/deep_tree.py [--levels 10000]
"""
from __future__ import annotations

import argparse
import time

from prometheus_client import CollectorRegistry

from loopwarden.eventformat import EventKind, EventRecord
from loopwarden_server.config import load_config_text
from loopwarden_server.core import CoreService
from loopwarden_server.metrics import Metrics
from loopwarden_server.settings import Limits

CONFIG = "{tools: {loopDetection: {enabled: true}}, loopwarden: {runTree: {maxDepth: 20000}}}"
BLOCK = 1000


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--levels", type=int, default=10_000)
    args = parser.parse_args()
    core = CoreService(load_config_text(CONFIG), Metrics(CollectorRegistry()), Limits(), max_runs=args.levels + 10,
                       idle_ttl_seconds=3600, clock=time.monotonic)
    blocks = []
    for start in range(0, args.levels, BLOCK):
        began = time.perf_counter()
        for n in range(start, min(start + BLOCK, args.levels)):
            parent = f"level-{n - 1}" if n else ""
            core.decide(EventRecord(EventKind.TOOL_CALL, run_id=f"level-{n}", parent_run_id=parent, tool_name="read",
                                    params_json="{}"))
        blocks.append(time.perf_counter() - began)
    print(f"seconds per {BLOCK:,} levels, from depth 0 to {args.levels:,}:", " ".join(f"{b:.3f}" for b in blocks))
    print(f"last block / first block: {blocks[-1] / blocks[0]:.2f}")


if __name__ == "__main__":
    main()
