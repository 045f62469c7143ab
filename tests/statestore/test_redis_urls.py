"""Which Redis a --state-store URL names: one server or a cluster (redis+cluster://), refused
with the part that is wrong, never echoing a password."""
from __future__ import annotations

import pytest

from loopwarden_server.statestore import open_state_store, parse_state_store
from loopwarden_server.statestore.base import StateStoreError


@pytest.mark.parametrize("url", ["redis+cluster://127.0.0.1:7000", "rediss+cluster://u:p@a:7000,b:7001/0",
                                 "redis+cluster://[::1]:7000,h"])
def test_a_cluster_url_is_accepted(url):
    assert url == parse_state_store(url)


@pytest.mark.parametrize(("url", "names"), [
    ("redis+cluster://", "no seed node"),
    ("redis+cluster://h:port", "'h:port'"),
    ("redis+cluster://h:7000/2", "only database 0"),
    ("memcached://h", "redis+cluster://"),
])
def test_a_bad_url_is_refused_naming_what_is_wrong(url, names):
    with pytest.raises(ValueError, match=names.replace("+", r"\+")):
        parse_state_store(url)


def test_a_cluster_store_describes_its_seeds_without_credentials():
    store = open_state_store("redis+cluster://user:s3cret@127.0.0.1:7000,127.0.0.1:7001", "lw:")
    store.check()  # builds the client; nothing connects until the first operation
    assert (True, "redis+cluster://127.0.0.1:7000,127.0.0.1:7001") == (store.cluster, store.describe())
    assert "s3cret" not in store.describe()


def test_a_single_server_url_keeps_the_single_node_client():
    store = open_state_store("redis://127.0.0.1:6379/0", "lw:")
    store.check()
    assert not store.cluster
    with pytest.raises(StateStoreError):
        open_state_store("redis+cluster://h:7000/3", "lw:").check()
