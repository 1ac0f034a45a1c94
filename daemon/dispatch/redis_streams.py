"""Redis Streams dispatch: XADD on enqueue, XREADGROUP in one consumer group, XACK after the
final state commits, XAUTOCLAIM for entries stranded by dead consumers.

Synchronous redis-py (with hiredis) on connections owned by threads (``handoff.Handoff``):
every public method is one unit of work, one thread hop. The blocking read has a connection
and a thread of its own. It is bounded (``block_s``) and must be called inside a shielded
scope: cancelling an in-flight XREADGROUP can strand an entry in the PEL, which
``autoclaim`` takes back (docs/architecture.md).
"""

from __future__ import annotations

import contextlib
import json
import socket
from collections.abc import Iterator, Sequence
from typing import Any

import redis
from redis.backoff import NoBackoff
from redis.exceptions import ConnectionError as RedisConnectionError
from redis.exceptions import RedisError, ResponseError
from redis.exceptions import TimeoutError as RedisTimeoutError
from redis.retry import Retry

from gochatd.config import Settings
from gochatd.dispatch.entries import StreamEntry, entry_from_redis, field_text
from gochatd.dispatch.scripts import FILL_SCRIPT, PUBLISH_SCRIPT
from gochatd.errors import ConfigError, DispatchUnavailable, ResourceClosed
from gochatd.handoff import Handoff
from gochatd.model import DispatchRef

_TRANSIENT = (RedisConnectionError, RedisTimeoutError, OSError)


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
    ) -> None:
        self._url = url
        self.prefix = prefix
        self.group = group
        self.consumer = consumer
        self.maxlen = maxlen
        self.block_s = block_s
        self._pool: Handoff[redis.Redis] | None = None
        self._reader: Handoff[redis.Redis] | None = None
        self._shared: redis.Redis | None = None
        self._fill: Any = None
        self._publish: Any = None

    @classmethod
    def from_settings(cls, settings: Settings, *, consumer: str) -> RedisStreams:
        return cls(settings.redis_url, prefix=settings.worker_redis_stream_prefix,
                   group=settings.worker_redis_consumer_group, consumer=consumer,
                   maxlen=settings.worker_redis_stream_maxlen,
                   block_s=settings.worker_redis_block_timeout_s)

    def key(self, queue: str) -> str:
        return f"{self.prefix}:{queue}"

    def queue_of(self, key: str) -> str:
        return key[len(self.prefix) + 1:]

    def _connect(self, socket_timeout_s: float) -> redis.Redis:
        """A connection thread's own client (one connection, opened on first use)."""
        return redis.Redis.from_url(
            self._url,
            decode_responses=False,
            socket_connect_timeout=2.0,
            socket_timeout=socket_timeout_s,
            health_check_interval=0,
            client_name="gochatd",
            single_connection_client=True,
            # A connection left over from before a Redis restart fails its first command;
            # retry that once on a fresh connection (a real outage still fails).
            retry=Retry(NoBackoff(), 1, supported_errors=(RedisConnectionError,)),
        )

    async def open(self) -> None:
        # Commands answer at once; anything much slower than a second is a hang.
        self._pool = Handoff(
            "gochatd-redis", lambda: self._connect(5.0), _close_client, size=4,
            interrupt=_break_socket, abandon_s=1.0,
        )
        # A blocked read returns within block_s; it gets a connection of its own.
        self._reader = Handoff(
            "gochatd-redis-read", lambda: self._connect(self.block_s + 5.0), _close_client,
            interrupt=_break_socket, abandon_s=1.0,
        )
        # Thread-safe (a connection pool): for callers on other pools' threads.
        self._shared = redis.Redis.from_url(
            self._url, socket_connect_timeout=2.0, socket_timeout=5.0, health_check_interval=0,
            client_name="gochatd", max_connections=16,
            retry=Retry(NoBackoff(), 1, supported_errors=(RedisConnectionError,)),
        )
        self._fill = self._shared.register_script(FILL_SCRIPT)
        self._publish = self._shared.register_script(PUBLISH_SCRIPT)

    async def close(self) -> None:
        shared, self._shared = self._shared, None
        if shared is not None:
            shared.close()  # only closes idle connections: no I/O to wait for
        pool, reader, self._pool, self._reader = self._pool, self._reader, None, None
        for handoff in (pool, reader):
            if handoff is not None:
                await handoff.close()

    async def _call(self, fn: Any, *args: Any, reader: bool = False) -> Any:
        handoff = self._reader if reader else self._pool
        if handoff is None:
            raise DispatchUnavailable("redis client not open")
        with _translated():
            try:
                return await handoff.run(lambda r: fn(r, *args))
            except ResourceClosed:
                raise DispatchUnavailable("redis client closed") from None

    # -- health ----------------------------------------------------------------------------

    async def ping(self) -> None:
        def _ping(r: redis.Redis) -> None:
            r.ping()

        await self._call(_ping)

    async def check_url(self) -> None:
        """Refuse a URL the server never accepts (a database index it does not have:
        ``ConfigError``). An outage says nothing about the URL: the database dispatches
        meanwhile, so it passes."""
        with contextlib.suppress(DispatchUnavailable):
            await self.ping()

    async def ensure_groups(self, queues: Sequence[str]) -> None:
        group = self.group

        def _ensure(r: redis.Redis, keys: list[str]) -> None:
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
        client = self._shared
        if client is None:
            raise DispatchUnavailable("redis client not open")
        with _translated():
            self._publish_with(client, refs)

    def _publish_with(self, r: redis.Redis, refs: Sequence[DispatchRef]) -> None:
        keys: dict[str, int] = {}
        entries = [
            [keys.setdefault(self.key(ref.queue), len(keys) + 1), str(ref.job_id), ref.job_type,
             ref.queue, ref.tenant_id]
            for ref in refs
        ]
        args = [self.maxlen, json.dumps(entries, ensure_ascii=False)]
        self._publish(keys=list(keys), args=args, client=r)

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
        keys = [self.key(q) for q in queues]
        group, consumer, fill = self.group, self.consumer, self._fill
        block_ms = max(1, int(block_s * 1000))
        # XREADGROUP's COUNT is per stream: split it so the total stays within ``count``.
        per_stream = max(1, count // len(keys))

        def _fill(r: redis.Redis) -> list[StreamEntry]:
            got = fill(keys=keys, args=[group, consumer, count], client=r)
            return [entry_from_redis(s, i, f) for s, i, f in got or []]

        def _read(r: redis.Redis) -> list[StreamEntry]:
            if fill_first:
                got = _fill(r)
                if got:
                    return got
            try:
                res: Any = r.xreadgroup(
                    group, consumer, dict.fromkeys(keys, ">"),
                    count=count if fill_first else per_stream, block=block_ms,
                )
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
        if not entries:
            return
        by_stream: dict[str, list[str]] = {}
        for entry in entries:
            by_stream.setdefault(entry.stream, []).append(entry.entry_id)
        group = self.group

        def _ack(r: redis.Redis) -> None:
            with r.pipeline(transaction=False) as pipe:
                for stream, ids in by_stream.items():
                    pipe.xack(stream, group, *ids)
                pipe.execute()

        await self._call(_ack)

    async def hand_back(self, entries: Sequence[StreamEntry]) -> None:
        """Give entries we read but will not run back to the group: re-add, then ack."""
        if not entries:
            return
        group, maxlen = self.group, self.maxlen

        def _hand_back(r: redis.Redis) -> None:
            with r.pipeline(transaction=True) as pipe:
                for entry in entries:
                    pipe.xadd(entry.stream, entry.fields, maxlen=maxlen, approximate=True)  # type: ignore[arg-type]
                    pipe.xack(entry.stream, group, entry.entry_id)
                pipe.execute()

        await self._call(_hand_back)

    async def autoclaim(
        self, queues: Sequence[str], min_idle_s: float, count: int
    ) -> list[StreamEntry]:
        """Take over entries idle in any consumer's PEL for longer than ``min_idle_s``."""
        keys = [self.key(q) for q in queues]
        group, consumer = self.group, self.consumer
        min_idle_ms = int(min_idle_s * 1000)

        def _autoclaim(r: redis.Redis) -> list[StreamEntry]:
            out: list[StreamEntry] = []
            for key in keys:
                try:
                    res = r.xautoclaim(
                        key, group, consumer, min_idle_time=min_idle_ms, start_id="0-0",
                        count=count,
                    )
                except ResponseError as exc:
                    if "NOGROUP" in str(exc):
                        continue
                    raise
                # res = [next_start, [[id, fields], ...], [deleted ids]]
                for item in res[1] or []:
                    if item is None:
                        continue
                    entry_id, fields = item
                    if fields is None:
                        continue
                    out.append(entry_from_redis(key, entry_id, fields))
                if len(res) > 2 and res[2]:
                    r.xack(key, group, *res[2])
            return out

        return list(await self._call(_autoclaim))

    async def backlog(self, queue: str) -> int:
        """Entries of ``queue`` waiting in the stream for this group: lag plus pending."""
        key = self.key(queue)

        def _backlog(r: redis.Redis) -> int:
            info = self._group_info(r, key)
            if info is None:
                return 0
            lag = info.get("lag")
            if lag is None:  # unknown after deletions: assume the whole stream
                lag = r.xlen(key)
            return int(lag) + int(info.get("pending") or 0)

        return int(await self._call(_backlog))

    def _group_info(self, r: redis.Redis, key: str) -> dict[str, Any] | None:
        try:
            groups: list[dict[str, Any]] = r.xinfo_groups(key)
        except ResponseError:
            return None
        return next((g for g in groups if field_text(g.get("name")) == self.group), None)

    async def trim(self, queues: Sequence[str]) -> int:
        """Drop entries every consumer has read and acked; returns entries removed."""
        keys = [self.key(q) for q in queues]

        def _trim(r: redis.Redis) -> int:
            removed = 0
            for key in keys:
                info = self._group_info(r, key)
                if info is None:
                    continue
                pending = r.xpending(key, self.group)
                if pending.get("pending"):
                    boundary = field_text(pending["min"])  # oldest unacked entry stays
                else:
                    last = field_text(info.get("last-delivered-id") or b"0-0")
                    ms, _, seq = last.partition("-")
                    boundary = f"{ms}-{int(seq or 0) + 1}"  # all delivered entries are acked
                removed += int(r.xtrim(key, minid=boundary, approximate=False))
            return removed

        return int(await self._call(_trim))


@contextlib.contextmanager
def _translated() -> Iterator[None]:
    """redis-py's errors as gochatd's: an outage, a loading or busy server and a key of the
    wrong type are ``DispatchUnavailable`` (the database dispatches instead)."""
    try:
        yield
    except _TRANSIENT as exc:
        raise DispatchUnavailable(f"redis unavailable: {type(exc).__name__}") from None
    except RedisError as exc:
        if "DB index is out of range" in str(exc):  # SELECT n: the user's URL is wrong
            raise ConfigError("redis_url: the Redis server has no database with that index "
                              "(DB index is out of range; 'databases' is 16 by default, "
                              "0-15)") from None
        if "LOADING" in str(exc) or "BUSY" in str(exc):
            raise DispatchUnavailable(f"redis unavailable: {type(exc).__name__}") from None
        if "WRONGTYPE" in str(exc):
            # A stream key holds something else: Redis cannot dispatch, the database can.
            raise DispatchUnavailable(f"redis unusable: {str(exc)[:120]}") from None
        raise


def _close_client(client: redis.Redis) -> None:
    client.close()


def _break_socket(client: redis.Redis) -> None:
    """Another thread: shut the client's socket down, so a command blocked on it fails now
    (redis-py then drops the connection and opens a new one for the next command)."""
    conn = client.connection
    sock = getattr(conn, "_sock", None) if conn is not None else None
    if sock is not None:
        sock.shutdown(socket.SHUT_RDWR)
