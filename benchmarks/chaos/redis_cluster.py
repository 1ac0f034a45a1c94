"""A Redis Cluster of our own on loopback: three masters (no replicas, no persistence), each a
``redis-server --cluster-enabled yes`` joined by ``redis-cli --cluster create``.

A master can be killed and started again on its port with its ``nodes.conf``: it comes back
owning its slots (nothing failed over to anyone), with empty streams. The chaos runner and
the tests share this one implementation."""

from __future__ import annotations

import contextlib
import random
import shutil
import socket
import subprocess
import time
from pathlib import Path

from redis.crc import key_slot

from benchmarks.chaos.redis_server import RedisServer

#: Short enough that a dead master is marked failed (and its FAIL flag cleared again after
#: the restart, two node timeouts later) within seconds; long enough for a busy machine.
NODE_TIMEOUT_MS = 2000


def cluster_port() -> int:
    """A free port P below 55536 whose bus port P + 10000 is free too."""
    for _ in range(200):
        port = random.randint(20000, 55535)
        with contextlib.ExitStack() as stack:
            try:
                for p in (port, port + 10000):
                    s = stack.enter_context(socket.socket())
                    s.bind(("127.0.0.1", p))
            except OSError:
                continue
            return port
    raise RuntimeError("no free port pair for a Redis Cluster node")


class ClusterNode(RedisServer):
    """One cluster member: its own directory (nodes.conf, log) and port."""

    def start(self, timeout_s: float = 10.0) -> None:
        self.dir.mkdir(parents=True, exist_ok=True)
        self.proc = subprocess.Popen(
            [self.binary, "--port", str(self.port), "--bind", "127.0.0.1", "--save", "",
             "--appendonly", "no", "--dir", str(self.dir), "--logfile", str(self.dir / "log"),
             "--cluster-enabled", "yes", "--cluster-config-file", "nodes.conf",
             "--cluster-node-timeout", str(NODE_TIMEOUT_MS),
             # The other masters keep serving their slots while one is down.
             "--cluster-require-full-coverage", "no"],
            stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
            start_new_session=True,
        )
        deadline = time.monotonic() + timeout_s
        while time.monotonic() < deadline:
            if self.ping():
                return
            if self.proc.poll() is not None:
                break
            time.sleep(0.02)
        raise RuntimeError(f"redis-server (cluster node) did not start on port {self.port}")


class RedisCluster:
    def __init__(self, base: Path, binary: str | None = None, masters: int = 3) -> None:
        self.binary = binary or shutil.which("redis-server") or "redis-server"
        cli = Path(self.binary).with_name("redis-cli")
        self.cli = str(cli) if cli.exists() else (shutil.which("redis-cli") or "redis-cli")
        self.nodes = [ClusterNode(base / f"node-{i}", cluster_port(), self.binary)
                      for i in range(masters)]
        for node in self.nodes:
            node.dir = base / f"node-{node.port}"

    @property
    def url(self) -> str:
        """The seed node gochatd is given (``redis_url`` with ``redis_cluster: true``)."""
        return f"redis://127.0.0.1:{self.nodes[0].port}/0"

    def start(self, timeout_s: float = 30.0) -> None:
        for node in self.nodes:
            node.start()
        subprocess.run(
            [self.cli, "--cluster", "create",
             *(f"127.0.0.1:{n.port}" for n in self.nodes), "--cluster-yes"],
            check=True, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
            stderr=subprocess.PIPE, timeout=timeout_s,
        )
        self.wait_ok(timeout_s)

    def state_ok(self) -> bool:
        """Every node answers, says ``cluster_state:ok`` and flags no node as failing."""
        try:
            for node in self.nodes:
                if b"cluster_state:ok" not in node.command("CLUSTER", "INFO"):
                    return False
                for line in node.command("CLUSTER", "NODES").decode(errors="replace").splitlines():
                    fields = line.split()
                    if len(fields) > 2 and "fail" in fields[2]:
                        return False
        except OSError:
            return False
        return True

    def wait_ok(self, timeout_s: float = 30.0) -> None:
        deadline = time.monotonic() + timeout_s
        while time.monotonic() < deadline:
            if self.state_ok():
                return
            time.sleep(0.05)
        raise RuntimeError("the Redis Cluster did not reach cluster_state:ok")

    def node_of(self, key: str) -> ClusterNode:
        """The master that serves ``key``'s slot (as any live node's CLUSTER NODES says)."""
        slot = key_slot(key.encode())
        for node in self.nodes:
            try:
                text = node.command("CLUSTER", "NODES").decode(errors="replace")
            except OSError:
                continue
            for line in text.splitlines():
                fields = line.split()
                if len(fields) < 9 or "master" not in fields[2]:
                    continue
                port = int(fields[1].split("@")[0].rsplit(":", 1)[1])
                for span in fields[8:]:
                    lo, _, hi = span.partition("-")
                    if lo.isdigit() and int(lo) <= slot <= int(hi or lo):
                        return next(n for n in self.nodes if n.port == port)
        raise RuntimeError(f"no live node knows who serves {key!r}")

    def kill(self, node: ClusterNode) -> None:
        node.kill()

    def restart(self, node: ClusterNode, timeout_s: float = 60.0) -> None:
        """Start a killed master again (its nodes.conf keeps its id and slots) and wait until
        the whole cluster says ok."""
        node.start()
        node.restarts += 1
        self.wait_ok(timeout_s)

    def stop(self) -> None:
        for node in self.nodes:
            node.stop()

