"""Redis connections for the dispatcher and the gateway: one server (``redis.Redis``) or,
with ``redis_cluster: true``, a Redis Cluster (``redis.cluster.RedisCluster``, with
``redis_url`` as its seed node), the Lua scripts both run, and redis-py's errors as gochatd's.

In a cluster a command, a script or a transaction may only touch keys of one hash slot:
``slot_groups`` splits a list of keys by slot, in order, so the callers run one script (or
one transaction) per slot. The stream names stay ``{prefix}:{queue}`` (docs/wire-contract.md).

The hot path (the fill and publish scripts, the blocking read, acks, hand-backs) runs
``on_slot``: straight on the client of the master that serves the slot, as on one server,
without the cluster client's per-command routing (about as much CPU again as the command;
docs/redis-cluster.md). A moved slot or a dead connection refreshes the slot map and tries
once more.
"""

from __future__ import annotations

import contextlib
import hashlib
import socket
from collections.abc import Callable, Iterator, Sequence
from typing import Any, TypeVar
from urllib.parse import urlsplit

import redis
from redis.backoff import NoBackoff
from redis.cluster import RedisCluster
from redis.crc import key_slot
from redis.exceptions import (
    AskError,
    ClusterError,
    NoScriptError,
    OutOfMemoryError,
    RedisClusterException,
    RedisError,
    ResponseError,
)
from redis.exceptions import ConnectionError as RedisConnectionError
from redis.exceptions import TimeoutError as RedisTimeoutError
from redis.retry import Retry

from gochatd.errors import ConfigError, DispatchUnavailable

#: A client of either kind: ``redis.Redis`` or ``redis.cluster.RedisCluster`` (the commands
#: gochatd runs have the same signatures on both).
RedisClient = Any

#: OutOfMemoryError: ``maxmemory`` reached with ``noeviction``: writes (XADD) are refused
#: until memory is freed; the database dispatches meanwhile.
TRANSIENT = (RedisConnectionError, RedisTimeoutError, OSError, RedisClusterException,
             ClusterError, OutOfMemoryError)
#: Replies of a cluster that cannot serve a slot now (a master down, a failover under way).
_CLUSTER_UNAVAILABLE = ("CLUSTERDOWN", "MASTERDOWN", "TRYAGAIN", "LOADING", "BUSY")


def check_cluster_url(url: str) -> None:
    """A cluster has no Unix sockets and only database 0: refuse the URL up front."""
    parts = urlsplit(url)
    if parts.scheme not in ("redis", "rediss"):
        raise ConfigError("redis_url: a Redis Cluster seed node needs redis:// or rediss:// "
                          "(redis_cluster is true)")
    if parts.path.strip("/") not in ("", "0"):
        raise ConfigError("redis_url: a Redis Cluster has only database 0 "
                          "(redis_cluster is true)")


def connect(url: str, *, cluster: bool, socket_timeout_s: float, client_name: str,
            connect_timeout_s: float = 2.0, single: bool = True,
            max_connections: int | None = None) -> RedisClient:
    """A client for one thread (``single``: one connection) or a thread-safe pooled one.

    A cluster client asks its seed node for the slot map here (network I/O: call it on a
    connection thread, never on the event loop)."""
    if cluster:
        extra: dict[str, Any] = {} if max_connections is None else {
            "max_connections": max_connections}
        return RedisCluster.from_url(
            url, socket_connect_timeout=connect_timeout_s, socket_timeout=socket_timeout_s,
            health_check_interval=0, client_name=client_name,
            # Built while a master is down too: its slots fail, the others answer.
            require_full_coverage=False,
            # One retry after a refreshed slot map (a moved slot, a failed-over master);
            # a master that is down fails at once and the daemon polls the database.
            retry=Retry(NoBackoff(), 1), **extra,
        )
    options: dict[str, Any] = {"single_connection_client": True} if single else {
        "max_connections": max_connections or 16}
    return redis.Redis.from_url(
        url, decode_responses=False, socket_connect_timeout=connect_timeout_s,
        socket_timeout=socket_timeout_s, health_check_interval=0, client_name=client_name,
        # A connection left over from before a Redis restart fails its first command;
        # retry that once on a fresh connection (a real outage still fails).
        retry=Retry(NoBackoff(), 1, supported_errors=(RedisConnectionError,)), **options,
    )


def slot_groups(keys: Sequence[str], cluster: bool) -> list[list[str]]:
    """``keys`` split by hash slot, each group and the groups in the order given; one group
    when not a cluster."""
    if not cluster:
        return [list(keys)] if keys else []
    groups: dict[int, list[str]] = {}
    for key in keys:
        groups.setdefault(key_slot(key.encode()), []).append(key)
    return list(groups.values())


def slot_of(key: str) -> int:
    return int(key_slot(key.encode()))


T = TypeVar("T")


def on_slot(client: RedisClient, key: str, fn: Callable[[RedisClient], T]) -> T:
    """``fn`` on the client that serves ``key``: ``client`` itself (one server) or, in a
    cluster, the plain client of the slot's master. ``MOVED``/``ASK`` (a slot that moved) or
    a connection error (a failed-over or restarted master) refresh the slot map and run
    ``fn`` once more; a second failure is raised."""
    if not isinstance(client, RedisCluster):
        return fn(client)
    try:
        return fn(_master_of(client, key))
    except (AskError, RedisConnectionError, RedisTimeoutError):  # AskError: MOVED too
        client.nodes_manager.initialize()
    return fn(_master_of(client, key))


def _master_of(client: RedisCluster, key: str) -> redis.Redis:
    """The plain client of the master serving ``key``'s slot (from the cached slot map)."""
    node = client.get_node_from_key(key)  # type: ignore[no-untyped-call]
    return client.get_redis_connection(node)


def ping(client: RedisClient) -> None:
    """PING the server, or in a cluster every master: one that is down fails the probe."""
    if isinstance(client, RedisCluster):
        client.ping(target_nodes=RedisCluster.PRIMARIES)
    else:
        client.ping()


def cluster_enabled(client: RedisClient) -> bool:
    """Whether the server is a Redis Cluster node (``INFO cluster``); False when it does not
    say (a proxy that refuses INFO)."""
    try:
        info: dict[str, Any] = client.info("cluster")
    except ResponseError:
        return False
    return bool(info.get("cluster_enabled"))


class LuaScript:
    """A script run by SHA (EVALSHA), loaded on NOSCRIPT: on a restarted server, or in a
    cluster on every master (a master that restarted empty has lost it)."""

    def __init__(self, source: str) -> None:
        self.source = source
        self.sha = hashlib.sha1(source.encode()).hexdigest()  # Redis' own id

    def __call__(self, client: RedisClient, keys: Sequence[str], args: Sequence[Any]) -> Any:
        """Run on ``client`` as given (the caller routes it: ``on_slot``)."""
        try:
            return client.evalsha(self.sha, len(keys), *keys, *args)
        except NoScriptError:
            client.script_load(self.source)
            return client.evalsha(self.sha, len(keys), *keys, *args)


@contextlib.contextmanager
def translated() -> Iterator[None]:
    """redis-py's errors as gochatd's: an outage, a loading or busy server, a server at
    ``maxmemory`` that refuses writes, a cluster slot that no master serves now and a key of
    the wrong type are ``DispatchUnavailable`` (the database dispatches instead)."""
    try:
        yield
    except TRANSIENT as exc:
        raise DispatchUnavailable(f"redis unavailable: {type(exc).__name__}") from None
    except RedisError as exc:
        if "DB index is out of range" in str(exc):  # SELECT n: the user's URL is wrong
            raise ConfigError("redis_url: the Redis server has no database with that index "
                              "(DB index is out of range; 'databases' is 16 by default, "
                              "0-15)") from None
        if any(word in str(exc) for word in _CLUSTER_UNAVAILABLE):
            raise DispatchUnavailable(f"redis unavailable: {type(exc).__name__}") from None
        if isinstance(exc, AskError):  # MOVED/ASK outside the cluster client: a cluster node
            raise DispatchUnavailable("redis unavailable: MOVED (a slot moved twice, or a "
                                      "cluster node while redis_cluster is false)") from None
        if "WRONGTYPE" in str(exc):
            # A stream key holds something else: Redis cannot dispatch, the database can.
            raise DispatchUnavailable(f"redis unusable: {str(exc)[:120]}") from None
        raise


def close_client(client: RedisClient) -> None:
    """Close the client; a cluster client's seed-node clients too (redis-py keeps the one it
    bootstrapped from apart from its node map, and its close leaves that one open)."""
    client.close()
    if isinstance(client, RedisCluster):
        seeds = list(getattr(client.nodes_manager, "startup_nodes", {}).values())
        for node in seeds:
            if node.redis_connection is not None:
                node.redis_connection.close()


def break_socket(client: RedisClient) -> None:
    """Another thread: shut the client's socket down, so a command blocked on it fails now
    (redis-py then drops the connection and opens a new one for the next command). A cluster
    client's connections live in its nodes' pools: each in-use one is shut down."""
    conns: list[Any] = []
    if isinstance(client, RedisCluster):
        nodes: list[Any] = client.get_nodes()  # type: ignore[no-untyped-call]
        for node in nodes:
            pool = getattr(node.redis_connection, "connection_pool", None)
            with contextlib.suppress(RuntimeError):  # the set changed under us: skip it
                conns.extend(list(getattr(pool, "_in_use_connections", ())))
    elif client.connection is not None:
        conns.append(client.connection)
    for conn in conns:
        sock = getattr(conn, "_sock", None)
        if sock is not None:
            with contextlib.suppress(OSError):
                sock.shutdown(socket.SHUT_RDWR)
