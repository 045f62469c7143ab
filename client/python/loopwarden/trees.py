"""Each run's tree root, as far as this client has seen it: what the routing header names.

A child run (an event with parent_run_id) is stored and routed with its whole tree, so the
x-loopwarden-run-id header of its stream, Check and InspectRun names the tree's ROOT run. The
events say only the parent; the client learns the chain from the events it sends (a child's root
is its parent's root) and from an explicit `root_run_id` (a child run in another process, whose
parent this client never saw). Bounded: the least recently used runs are forgotten first, and a
forgotten run routes by its own id, as a root does.
"""
from __future__ import annotations

import threading
from collections import OrderedDict

DEFAULT_CAPACITY = 65536


class RunTrees:
    def __init__(self, capacity: int = DEFAULT_CAPACITY) -> None:
        self._roots: OrderedDict[str, str] = OrderedDict()  # child run id -> root run id
        self._capacity = capacity
        self._lock = threading.Lock()  # the blocking client's verbs may run on several threads

    def root(self, run_id: str) -> str:
        """The root of run_id's tree (run_id itself for a root or a run never seen as a child)."""
        run_id = run_id.strip()
        with self._lock:
            root = self._roots.get(run_id)
            if root is None:
                return run_id
            self._roots.move_to_end(run_id)
            return root

    def learn(self, run_id: str, parent_run_id: str = "", root_run_id: str = "") -> str:
        """Note what one event says of its run's place; returns the run's root. An explicit root
        wins; a parent places a run not placed yet (a run's parent is fixed by its first event)."""
        run_id, parent_run_id, root_run_id = run_id.strip(), parent_run_id.strip(), root_run_id.strip()
        if root_run_id and root_run_id != run_id:
            root = root_run_id
        elif parent_run_id and parent_run_id != run_id:
            with self._lock:
                known = run_id in self._roots
            if known:
                return self.root(run_id)
            root = self.root(parent_run_id)
        else:
            return self.root(run_id)
        with self._lock:
            self._roots[run_id] = root
            self._roots.move_to_end(run_id)
            while len(self._roots) > self._capacity:
                self._roots.popitem(last=False)
        return root

    def forget(self, run_id: str) -> None:
        """The run ended: its entry is no longer needed (its children keep theirs)."""
        with self._lock:
            self._roots.pop(run_id.strip(), None)
