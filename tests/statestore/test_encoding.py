"""One run as bytes, and its key: round trips, versioning, no two runs share a key."""
from __future__ import annotations

import time

import pytest
from hypothesis import given
from hypothesis import strategies as st

from loopwarden_server.config import load_default_config
from tests.reference.engine import ToolCall, ToolOutcome, evaluate, new_run_state
from loopwarden_server.statestore.encoding import MAGIC, EncodingError, key_parts, run_key, tree_key, tree_key_parts
from tests.reference.codec import MAGIC_V3, decode_run, encode_run
from tests.reference.store import RunStore

ids = st.text(st.characters(codec="utf-8"), max_size=40)


def _looping_run(store: RunStore, tenant: str, run_id: str, times: int):
    config = load_default_config()
    settings = config.settings_for("")
    entry = store.create(tenant, run_id, new_run_state(settings))
    for _ in range(times):
        evaluate(entry.state, ToolCall("read", '{"p":1}'), settings, config.tool_catalog)
        evaluate(entry.state, ToolOutcome("read", '{"p":1}', result_json='{"ok":true}'), settings, config.tool_catalog)
    return entry


class TestKeys:
    @given(ids, ids, ids, ids)
    def test_two_pairs_share_a_key_only_when_they_are_equal(self, t1, r1, t2, r2):
        """The key names (tenant, run_id) exactly."""
        assert ((t1, r1) == (t2, r2)) == (run_key(t1, r1) == run_key(t2, r2))

    @given(ids, ids)
    def test_a_key_names_its_pair_and_is_one_hash_tag(self, tenant, run_id):
        """Braces around the whole key: Redis Cluster hashes all of it to one slot."""
        key = run_key(tenant, run_id)
        assert (tenant, run_id) == key_parts(key)
        assert key.startswith(b"{") and key.endswith(b"}") and key.count(b"{") == 1 and key.count(b"}") == 1

    @given(ids, ids, ids)
    def test_a_child_runs_key_carries_its_roots_hash_tag(self, tenant, root, run_id):
        """Run trees: a child run is keyed under its root's tag (one slot for the tree); a root keeps the plain key."""
        key = tree_key(tenant, root, run_id)
        assert (tenant, run_id) == key_parts(key)
        if root in ("", run_id):  # "": the run is its own root
            assert run_key(tenant, run_id) == key
        else:
            assert (tenant, root, run_id) == tree_key_parts(key)
            assert key.startswith(run_key(tenant, root) + b".") and key.count(b"{") == 1 and key.count(b"}") == 1
        assert tree_key(tenant, "", run_id) == run_key(tenant, run_id)

    def test_malformed_tree_keys_are_refused(self):
        for key in (b"{a.b}c", b"{a.b}.c.d", b"{a}.b", b"a.b"):
            with pytest.raises(EncodingError):
                tree_key_parts(key)


class TestRunValues:
    def test_a_run_round_trips_with_its_history_and_idle_time(self):
        """Decoding an encoded run gives back its records, counts and how long it was idle."""
        clock = [100.0]
        store = RunStore(max_runs=10, idle_ttl_seconds=3600, clock=lambda: clock[0])
        entry = _looping_run(store, "acme", "run-1", 12)
        entry.agent_id, entry.session_id, entry.events_evaluated = "agent", "sess", 24
        clock[0] += 7
        data = encode_run(entry, wall_now=1_000_000.0, mono_now=clock[0])
        decoded, idle = decode_run(data, wall_now=1_000_003.0)
        assert data.startswith(MAGIC_V3)
        assert ("acme", "run-1", "agent", "sess", 24) == (decoded.tenant, decoded.run_id, decoded.agent_id,
                                                         decoded.session_id, decoded.events_evaluated)
        assert entry.state.records == decoded.state.records
        assert 10.0 == pytest.approx(idle)

    def test_a_version_1_value_is_read_without_its_old_digests(self):
        """Version 1 (BLAKE2b retry digests and triple keys) loads with its history and counts; its
        retry window is dropped and its run-wide triples forgotten, so nothing is matched against
        digests of the other algorithm."""
        import zlib

        import orjson

        from tests.reference.codec import unframe
        from tests.reference.retries import RetryWindow

        MAGIC_V1 = b"LWR\x01"

        clock = [100.0]
        store = RunStore(max_runs=10, idle_ttl_seconds=3600, clock=lambda: clock[0])
        entry = _looping_run(store, "", "old-1", 12)
        entry.retries = RetryWindow()
        entry.retries.remember(7, b"\x01" * 8, None)
        entry.state.seen_triples, entry.state.no_new_streak = {1, 2, 3}, 5
        record = orjson.loads(unframe(encode_run(entry, wall_now=1_000_000.0, mono_now=clock[0])))
        old = MAGIC_V1 + zlib.compress(orjson.dumps(record))
        decoded = _read_by_the_core(old, entry.run_id)
        assert list(entry.state.history.seqs) == [r.seq for r in decoded.state.history]
        assert entry.state.blocks == decoded.state.blocks
        assert (False, [], 0) == (decoded.HasField("retries"), list(decoded.state.seen_triples.keys),
                                  decoded.state.no_new_streak)

    def test_a_version_2_value_is_read_without_its_retry_window(self):
        """Version 2 (sha256 retry digests) loads whole but for its retry window: its digests are
        of another algorithm, so nothing is matched against them. Its run-wide triple keys are
        version 3's (sha256 both), so they stay."""
        import zlib

        import orjson

        from tests.reference.codec import unframe
        from tests.reference.retries import RetryWindow

        MAGIC_V2 = b"LWR\x02"

        clock = [100.0]
        store = RunStore(max_runs=10, idle_ttl_seconds=3600, clock=lambda: clock[0])
        entry = _looping_run(store, "", "old-2", 12)
        entry.retries = RetryWindow()
        entry.retries.remember(7, b"\x01" * 8, None)
        entry.state.seen_triples, entry.state.no_new_streak = {1, 2, 3}, 5
        record = orjson.loads(unframe(encode_run(entry, wall_now=1_000_000.0, mono_now=clock[0])))
        old = MAGIC_V2 + zlib.compress(orjson.dumps(record))
        decoded = _read_by_the_core(old, entry.run_id)
        assert list(entry.state.history.seqs) == [r.seq for r in decoded.state.history]
        assert (False, {1, 2, 3}, 5) == (decoded.HasField("retries"), set(decoded.state.seen_triples.keys),
                                         decoded.state.no_new_streak)

    @pytest.mark.parametrize("data", [b"", b"LWR\x04" + b"x", MAGIC + b"\0" * 4 + b"not a run", b"LWR\x05" + b"\0" * 8,
                                      b"LWR\x03not zlib", b"LWR\x02not zlib", b"LWR\x01not zlib",
                                      MAGIC_V3 + __import__("zlib").compress(b"[]")])
    def test_foreign_bytes_are_refused(self, data):
        """Another version, or bytes that are not a run, raise EncodingError (never a crash)."""
        from loopwarden_server.statestore.runs import CoreRuns
        from tests.core.harness import CoreEngine

        with pytest.raises(EncodingError):
            CoreRuns(CoreEngine("{}").service).take_in(data, time.time())


def _read_by_the_core(value: bytes, run_id: str):
    """A JSON-era value taken in by the core and written again: the run as the core reads it."""
    from loopwarden_server.statestore.runs import CoreRuns, Loaded
    from tests.core.harness import CoreEngine
    from tests.support.stored import run_message

    runs = CoreRuns(CoreEngine("{}", idle_ttl=1e12).service)
    assert Loaded.RESTORED == runs.take_in(value, 1_000_000.0)
    return run_message(runs.encode("", run_id, 1_000_000.0))
