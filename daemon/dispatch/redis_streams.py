"""Redis Streams dispatch: XADD on enqueue, XREADGROUP in one consumer group, XACK after the
final state commits, XAUTOCLAIM for entries stranded by dead consumers. On one Redis server,
or on a Redis Cluster (``redis_cluster``): there each script runs once per hash slot.

Synchronous redis-py (with hiredis) on connections owned by threads (``handoff.Handoff``):
every public method is one unit of work, one thread hop. The blocking read has a connection
and a thread of its own. It is bounded (``block_s``) and must be called inside a shielded
scope: cancelling an in-flight XREADGROUP can strand an entry in the PEL, which
``autoclaim`` takes back (docs/architecture.md).
"""

from __future__ import annotations

import json
import threading
from collections.abc import Sequence
from functools import partial
from typing import TYPE_CHECKING, Any

import anyio
from redis.exceptions import OutOfMemoryError, ResponseError

from gochatd.dispatch.entries import StreamEntry, entry_from_redis
from gochatd.dispatch.group_state import (
    ack_entries,
    autoclaim_entries,
    group_backlog,
    hand_back_entries,
    trim_acked,
)
from gochatd.dispatch.redis_client import (
    LuaScript,
    RedisClient,
    break_socket,
    check_cluster_url,
    close_client,
    cluster_enabled,
    connect,
    on_slot,
    ping,
    slot_groups,
    slot_of,
    translated,
)
from gochatd.dispatch.scripts import FILL_SCRIPT, PUBLISH_SCRIPT
from gochatd.errors import ConfigError, DispatchUnavailable, ResourceClosed
from gochatd.io.handoff import Handoff
from gochatd.model import DispatchRef
from gochatd.obs.redact import mask_url

if TYPE_CHECKING:
    from gochatd.config.settings import Settings

#: An XACK slower than this is abandoned (a black-holed Redis answers nothing until the
#: socket timeout): the entries are reclaimed and acked later.
ACK_TIMEOUT_S = 1.0
#: Commands on another pool's thread give up after this: the XADD right after an enqueue's
#: commit and the XACK right after a finish's run on the store's connection thread, which a
#: black-holed Redis would otherwise hold for the 5 s socket timeout (the enqueue's caller
#: with it). The job stands either way: the sweep dispatches it, the reclaim acks it.
HERE_TIMEOUT_S = 1.0
#: In a cluster a blocking XREADGROUP can wait on one slot's streams only: with queues in
#: several slots it waits at most this long, so the others are read again soon.
CLUSTER_BLOCK_S = 0.1


class RedisStreams:
    def __init__(
        self,
        url: str,
        *,
        prefix: str,
        group: str,
        consumer: str,
        maxlen: int,
        block_s: float,
        cluster: bool = False,
    ) -> None:
        if cluster:
            check_cluster_url(url)
        self._url = url
        self.cluster = cluster
        self.prefix = prefix
        self.group = group
        self.consumer = consumer
        self.maxlen = maxlen
        self.block_s = block_s
        self._pool: Handoff[RedisClient] | None = None
        self._reader: Handoff[RedisClient] | None = None
        self._shared: RedisClient | None = None
        self._shared_lock = threading.Lock()
        self._open = False
        self._fill = LuaScript(FILL_SCRIPT)
        self._publish = LuaScript(PUBLISH_SCRIPT)
        #: An XADD was refused for memory (``maxmemory``, ``noeviction``): reads still work,
        #: so the intake polls the database instead until ``check_writable`` passes.
        self.writes_refused = False

    @classmethod
    def from_settings(cls, settings: Settings, *, consumer: str) -> RedisStreams:
        return cls(settings.redis_url, prefix=settings.worker_redis_stream_prefix,
                   group=settings.worker_redis_consumer_group, consumer=consumer,
                   maxlen=settings.worker_redis_stream_maxlen,
                   block_s=settings.worker_redis_block_timeout_s,
                   cluster=settings.redis_cluster)

    @property
    def url(self) -> str:
        """The server's URL, password included: mask it (``redact.mask_url``) to show it."""
        return self._url

    def _slot(self, key: str) -> int:
        """The key's hash slot in a cluster; one server is one "slot"."""
        return slot_of(key) if self.cluster else 0

    def key(self, queue: str) -> str:
        return f"{self.prefix}:{queue}"

    def queue_of(self, key: str) -> str:
        return key[len(self.prefix) + 1:]

    def _connect(self, socket_timeout_s: float) -> RedisClient:
        """A connection thread's own client (one connection, opened on first use; a cluster
        client one per master)."""
        return connect(self._url, cluster=self.cluster, socket_timeout_s=socket_timeout_s,
                       client_name="gochatd")

    async def open(self) -> None:
        # Commands answer at once; anything much slower than a second is a hang.
        self._pool = Handoff(
            "gochatd-redis", lambda: self._connect(5.0), close_client, size=4,
            interrupt=break_socket, abandon_s=1.0,
        )
        # A blocked read returns within block_s; it gets a connection of its own.
        self._reader = Handoff(
            "gochatd-redis-read", lambda: self._connect(self.block_s + 5.0), close_client,
            interrupt=break_socket, abandon_s=1.0,
        )
        self._open = True

    def open_here(self) -> None:
        """Without an event loop (``SyncClient``): only the thread-safe client, made on
        first use by ``publish_here``/``check_url_here`` on the calling thread."""
        self._open = True

    def close_here(self) -> None:
        with self._shared_lock:
            client, self._shared = self._shared, None
            self._open = False
        if client is not None:
            close_client(client)

    def check_url_here(self) -> bool:
        """``check_url`` on the calling thread, through the thread-safe client."""
        try:
            with translated():
                client = self._shared_client()
                ping(client)
                if not self.cluster and cluster_enabled(client):
                    raise ConfigError(
                        f"redis_url: {mask_url(self._url)} is a Redis Cluster node; set "
                        "redis_cluster: true (GOCHAT_REDIS_CLUSTER=true; redis_cluster=True "
                        "for gochatd.Client and SyncClient)")
        except DispatchUnavailable:
            return False
        return True

    def _shared_client(self) -> RedisClient:
        """Thread-safe (a connection pool): for callers on other pools' threads. Made on
        first use, on such a thread (a cluster client asks for the slot map). Its commands
        give up after ``HERE_TIMEOUT_S``."""
        with self._shared_lock:
            if not self._open:
                raise DispatchUnavailable("redis client not open")
            if self._shared is None:
                self._shared = connect(
                    self._url, cluster=self.cluster, socket_timeout_s=HERE_TIMEOUT_S,
                    connect_timeout_s=HERE_TIMEOUT_S, client_name="gochatd", single=False,
                    max_connections=16)
            return self._shared

    async def close(self) -> None:
        self.close_here()  # the shared client only closes idle connections: no I/O to wait for
        pool, reader, self._pool, self._reader = self._pool, self._reader, None, None
        for handoff in (pool, reader):
            if handoff is not None:
                await handoff.close()

    async def _call(self, fn: Any, *args: Any, reader: bool = False) -> Any:
        handoff = self._reader if reader else self._pool
        if handoff is None:
            raise DispatchUnavailable("redis client not open")
        with translated():
            try:
                return await handoff.run(lambda r: fn(r, *args))
            except ResourceClosed:
                raise DispatchUnavailable("redis client closed") from None

    # -- health ----------------------------------------------------------------------------

    async def ping(self) -> None:
        """PING Redis; in a cluster every master (one down: the daemon polls)."""
        await self._call(ping)

    async def check_writable(self) -> None:
        """Raises ``DispatchUnavailable`` while Redis refuses writes: an XADD with NOMKSTREAM
        to a stream that does not exist writes nothing, but a server out of memory refuses
        it before looking. Clears ``writes_refused`` when it passes."""
        probe = f"{self.prefix}:write-probe"
        await self._call(lambda r: r.xadd(probe, {"probe": "1"}, nomkstream=True))
        self.writes_refused = False

    async def check_url(self) -> bool:
        """Refuse a URL the server never accepts (a database index it does not have) and a
        Redis Cluster node without ``redis_cluster`` (its MOVED replies would fail every
        XADD): ``ConfigError``. An outage says nothing about the URL: the database
        dispatches meanwhile, so it passes; returns whether Redis answered. Through the
        shared client, on a worker thread: a Redis that answers nothing holds the caller
        ``HERE_TIMEOUT_S``. (A pool thread's own client would connect, and so wait out its
        5 s socket timeout, when made.)"""
        return await anyio.to_thread.run_sync(self.check_url_here)

    async def ensure_groups(self, queues: Sequence[str]) -> None:
        group = self.group

        def _ensure(r: RedisClient, keys: list[str]) -> None:
            for key in keys:
                try:
                    r.xgroup_create(key, group, id="0", mkstream=True)
                except ResponseError as exc:
                    if "BUSYGROUP" not in str(exc):
                        raise

        await self._call(_ensure, [self.key(q) for q in queues])

    # -- producing -------------------------------------------------------------------------

    async def publish(self, refs: Sequence[DispatchRef]) -> None:
        """XADD one entry per job, all in one script call, with approximate MAXLEN trimming."""
        if refs:
            await self._call(self._publish_with, refs)

    def publish_here(self, refs: Sequence[DispatchRef]) -> None:
        """``publish`` on the calling thread (another pool's connection thread: the
        client's enqueue XADDs right after its commit, in the same hop), through a
        thread-safe client of its own. Raises ``DispatchUnavailable``."""
        if not refs:
            return
        with translated():
            self._publish_with(self._shared_client(), refs)

    def _publish_with(self, r: RedisClient, refs: Sequence[DispatchRef]) -> None:
        """One script call for all (one Redis), or one per hash slot (a cluster)."""
        by_slot: dict[int, list[DispatchRef]] = {}
        for ref in refs:
            by_slot.setdefault(self._slot(self.key(ref.queue)), []).append(ref)
        first_error: Exception | None = None
        for group in by_slot.values():
            keys: dict[str, int] = {}
            entries = [
                [keys.setdefault(self.key(ref.queue), len(keys) + 1), str(ref.job_id),
                 ref.job_type, ref.queue, ref.tenant_id]
                for ref in group
            ]
            args = [self.maxlen, json.dumps(entries, ensure_ascii=False)]
            try:  # like the script's own entries: one slot failing does not stop the others
                on_slot(r, next(iter(keys)), partial(self._publish, keys=list(keys), args=args))
            except OutOfMemoryError as exc:
                self.writes_refused = True
                first_error = first_error or exc
            except Exception as exc:  # re-raised below, after every slot
                first_error = first_error or exc
        if first_error is not None:
            raise first_error

    # -- consuming -------------------------------------------------------------------------

    async def read(
        self, queues: Sequence[str], count: int, block_s: float, *, fill_first: bool = True
    ) -> list[StreamEntry]:
        """Up to ``count`` new entries, preferring ``queues`` in order; blocks at most
        ``block_s`` when every stream is empty. Call inside a shielded scope.

        ``fill_first=False`` skips the weighted fill and goes straight to the blocking read
        (one round trip instead of two): for a trickle, where the last read already found
        less than it could take, so there is nothing to share out by weight."""
        if count <= 0 or not queues:
            return []
        groups = slot_groups([self.key(q) for q in queues], self.cluster)
        group, consumer, fill = self.group, self.consumer, self._fill
        # A cluster blocks on the first slot's streams only: with more slots, fill from all
        # of them first and block briefly.
        keys = groups[0]
        if len(groups) > 1:
            fill_first, block_s = True, min(block_s, CLUSTER_BLOCK_S)
        block_ms = max(1, int(block_s * 1000))
        # XREADGROUP's COUNT is per stream: split it so the total stays within ``count``.
        per_stream = max(1, count // len(keys))

        def _fill(r: RedisClient) -> list[StreamEntry]:
            out: list[StreamEntry] = []
            for slot_keys in groups:  # one script call per hash slot, in the weighted order
                if len(out) >= count:
                    break
                args = [group, consumer, count - len(out)]
                got = on_slot(r, slot_keys[0], partial(fill, keys=slot_keys, args=args))
                out.extend(entry_from_redis(s, i, f) for s, i, f in got or [])
            return out

        def _read(r: RedisClient) -> list[StreamEntry]:
            if fill_first:
                got = _fill(r)
                if got:
                    return got
            try:
                res: Any = on_slot(r, keys[0], lambda c: c.xreadgroup(
                    group, consumer, dict.fromkeys(keys, ">"),
                    count=count if fill_first else per_stream, block=block_ms,
                ))
            except ResponseError as exc:
                # NOGROUP: the group is gone; UNBLOCKED: the stream was deleted while we
                # waited on it. The fill recreates both.
                if "NOGROUP" not in str(exc) and "UNBLOCKED" not in str(exc):
                    raise
                return [] if fill_first else _fill(r)
            out: list[StreamEntry] = []
            for stream, items in res or []:
                out.extend(entry_from_redis(stream, entry_id, fields) for entry_id, fields in items)
            return out

        return list(await self._call(_read, reader=True))

    async def ack(self, entries: Sequence[StreamEntry]) -> None:
        if entries:
            await self._call(partial(ack_entries, entries=entries, group=self.group,
                                     slot=self._slot))

    def ack_here(self, entries: Sequence[StreamEntry]) -> None:
        """``ack`` on the calling thread (the store's connection thread, right after the
        finish committed: the finisher's XACK in the same hop), through a thread-safe client
        whose commands time out after ``HERE_TIMEOUT_S``. Raises ``DispatchUnavailable``."""
        if entries:
            with translated():
                ack_entries(self._shared_client(), entries, self.group, self._slot)

    async def hand_back(self, entries: Sequence[StreamEntry]) -> None:
        """Give entries we read but will not run back to the group: re-add, then ack."""
        if entries:
            await self._call(partial(hand_back_entries, entries=entries, group=self.group,
                                     maxlen=self.maxlen, slot=self._slot))

    async def autoclaim(
        self, queues: Sequence[str], min_idle_s: float, count: int
    ) -> list[StreamEntry]:
        """Take over entries idle in any consumer's PEL for longer than ``min_idle_s``."""
        return list(await self._call(partial(
            autoclaim_entries, keys=[self.key(q) for q in queues], group=self.group,
            consumer=self.consumer, min_idle_ms=int(min_idle_s * 1000), count=count)))

    async def backlog(self, queue: str) -> int:
        """Entries of ``queue`` waiting in the stream for this group: lag plus pending."""
        return int(await self._call(partial(group_backlog, key=self.key(queue), group=self.group)))

    async def trim(self, queues: Sequence[str]) -> int:
        """Drop entries every consumer has read and acked; returns entries removed."""
        keys = [self.key(q) for q in queues]
        return int(await self._call(partial(trim_acked, keys=keys, group=self.group)))
