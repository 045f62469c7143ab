"""A real Redis Cluster on loopback: six Debian redis-servers in cluster mode (three masters, one
replica each) joined by `redis-cli --cluster create`, children of the test, stopped at the end."""
from __future__ import annotations

import contextlib
import pathlib
import random
import socket
import subprocess
import tempfile
import time
from collections.abc import Iterator
from dataclasses import dataclass, field

from tests.support.servers import _stop, binary, wait_for_port

# Short, so that a killed master's replica takes over within seconds.
NODE_TIMEOUT_MS = 1500


def free_node_port(taken: set[int]) -> int:
    """A free port whose cluster bus port (+10000) is free too: both below 65536, so not one of
    the kernel's ephemeral ports."""
    while True:
        port = random.randrange(17000, 27000)
        if port in taken:
            continue
        try:
            with socket.socket() as a, socket.socket() as b:
                a.bind(("127.0.0.1", port))
                b.bind(("127.0.0.1", port + 10000))
        except OSError:
            continue
        taken.add(port)
        return port


@dataclass
class RedisCluster:
    directory: pathlib.Path
    ports: list[int]
    processes: dict[int, subprocess.Popen] = field(default_factory=dict)

    @property
    def url(self) -> str:
        """The state store URL: two seed nodes (either is enough to learn the slot map)."""
        return f"redis+cluster://127.0.0.1:{self.ports[0]},127.0.0.1:{self.ports[1]}"

    def start_node(self, port: int) -> None:
        node_dir = self.directory / str(port)
        node_dir.mkdir(exist_ok=True)
        args = [binary("redis-server"), "--port", str(port), "--bind", "127.0.0.1", "--save", "",
                "--appendonly", "no", "--dir", str(node_dir), "--daemonize", "no", "--logfile", str(node_dir / "redis.log"),
                "--cluster-enabled", "yes", "--cluster-config-file", "nodes.conf",
                "--cluster-node-timeout", str(NODE_TIMEOUT_MS)]
        self.processes[port] = subprocess.Popen(args, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
                                                stderr=subprocess.DEVNULL)
        wait_for_port(port, self.processes[port])

    def cli(self, port: int, *args: str) -> str:
        result = subprocess.run([binary("redis-cli"), "-p", str(port), *args], capture_output=True, text=True,
                                timeout=30)
        assert 0 == result.returncode, result.stdout + result.stderr
        return result.stdout

    def create(self) -> None:
        self.cli(self.ports[0], "--cluster", "create", *(f"127.0.0.1:{p}" for p in self.ports),
                 "--cluster-replicas", "1", "--cluster-yes")
        self.wait_ok()

    def wait_ok(self, timeout: float = 30.0) -> None:
        """Every live node says cluster_state:ok, three masters serve all slots, and every
        replica's link to its master is up."""
        deadline = time.monotonic() + timeout
        while True:
            live = [p for p in self.ports if self.processes.get(p) and self.processes[p].poll() is None]
            # A replica that has not finished its first sync has no data and never takes over.
            replicas_synced = all("master_link_status:down" not in self.cli(p, "info", "replication") for p in live)
            if all("cluster_state:ok" in self.cli(p, "cluster", "info") for p in live) and \
                    len(self.masters()) == 3 and replicas_synced:
                return
            assert time.monotonic() < deadline, f"cluster not ok after {timeout}s: {self.cli(live[0], 'cluster', 'nodes')}"
            time.sleep(0.1)

    def nodes(self) -> list[tuple[int, str, str]]:
        """(port, flags, master id or '-') of each node, as a live node sees them."""
        live = next(p for p in self.ports if self.processes.get(p) and self.processes[p].poll() is None)
        found = []
        for line in self.cli(live, "cluster", "nodes").splitlines():
            parts = line.split()
            port = int(parts[1].split("@")[0].rsplit(":", 1)[1])
            found.append((port, parts[2], parts[3]))
        return found

    def masters(self) -> list[int]:
        return [port for port, flags, _ in self.nodes() if "master" in flags and "fail" not in flags]

    def master_of(self, key: bytes) -> int:
        """The port of the master serving `key`'s slot."""
        live = next(p for p in self.ports if self.processes.get(p) and self.processes[p].poll() is None)
        slot = int(self.cli(live, "cluster", "keyslot", key.decode()).strip())
        for line in self.cli(live, "cluster", "nodes").splitlines():
            parts = line.split()
            if "master" not in parts[2] or "fail" in parts[2]:
                continue
            for span in parts[8:]:
                low, _, high = span.partition("-")
                if low.isdigit() and int(low) <= slot <= int(high or low):
                    return int(parts[1].split("@")[0].rsplit(":", 1)[1])
        raise AssertionError(f"no master serves slot {slot}")

    def kill(self, port: int) -> None:
        """kill -9 one node."""
        process = self.processes.pop(port)
        process.kill()
        process.wait(timeout=10)

    def keys(self) -> list[bytes]:
        """Every key on every live master but the runs' owner marks (KEY#owner)."""
        found = []
        for port in self.masters():
            if self.processes.get(port) and self.processes[port].poll() is None:
                found += [k.encode() for k in self.cli(port, "--raw", "keys", "*").split()]
        return sorted(key for key in found if not key.endswith(b"#owner"))

    def stop(self) -> None:
        for process in self.processes.values():
            _stop(process)
        self.processes.clear()


@contextlib.contextmanager
def redis_cluster() -> Iterator[RedisCluster]:
    """Three masters and three replicas on free loopback ports, created and ok."""
    binary("redis-cli")
    with tempfile.TemporaryDirectory(prefix="loopwarden-redis-cluster-") as tmp:
        taken: set[int] = set()
        cluster = RedisCluster(pathlib.Path(tmp), [free_node_port(taken) for _ in range(6)])
        try:
            for port in cluster.ports:
                cluster.start_node(port)
            cluster.create()
            yield cluster
        finally:
            cluster.stop()
