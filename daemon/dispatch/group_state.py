"""What one consumer group has left in a stream: its backlog (lag plus pending), the
entries every consumer has read and acked, which trimming removes, and the acks and
hand-backs of entries read. Plain functions over one synchronous redis-py client, run by
``RedisStreams`` as units of work (or on another pool's thread: ``ack_here``)."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from functools import partial
from typing import Any

from redis.exceptions import ResponseError

from gochatd.dispatch.entries import StreamEntry, entry_from_redis, field_text
from gochatd.dispatch.redis_client import RedisClient, on_slot


def ack_entries(r: RedisClient, entries: Sequence[StreamEntry], group: str,
                slot: Callable[[str], int]) -> None:
    """XACK ``entries``: one pipeline per hash slot's master (``slot``: a stream's slot)."""
    by_slot: dict[int, dict[str, list[str]]] = {}
    for entry in entries:
        by_slot.setdefault(slot(entry.stream), {}).setdefault(
            entry.stream, []).append(entry.entry_id)

    def _ack_streams(c: RedisClient, by_stream: dict[str, list[str]]) -> None:
        with c.pipeline(transaction=False) as pipe:
            for stream, ids in by_stream.items():
                pipe.xack(stream, group, *ids)
            pipe.execute()

    for by_stream in by_slot.values():
        on_slot(r, next(iter(by_stream)), partial(_ack_streams, by_stream=by_stream))


def hand_back_entries(r: RedisClient, entries: Sequence[StreamEntry], group: str, maxlen: int,
                      slot: Callable[[str], int]) -> None:
    """Re-add ``entries`` and ack the originals, in one transaction per hash slot (a
    transaction touches one slot)."""
    by_slot: dict[int, list[StreamEntry]] = {}
    for entry in entries:
        by_slot.setdefault(slot(entry.stream), []).append(entry)

    def _hand_back_slot(c: RedisClient, slot_entries: list[StreamEntry]) -> None:
        with c.pipeline(transaction=True) as pipe:
            for entry in slot_entries:
                pipe.xadd(entry.stream, entry.fields, maxlen=maxlen, approximate=True)
                pipe.xack(entry.stream, group, entry.entry_id)
            pipe.execute()

    for slot_entries in by_slot.values():
        on_slot(r, slot_entries[0].stream, partial(_hand_back_slot, slot_entries=slot_entries))


def autoclaim_entries(r: RedisClient, keys: Sequence[str], group: str, consumer: str,
                      min_idle_ms: int, count: int) -> list[StreamEntry]:
    """XAUTOCLAIM for ``consumer`` what idled in any consumer's PEL longer than
    ``min_idle_ms`` (up to ``count`` per stream); acks the ids whose entries were deleted."""
    out: list[StreamEntry] = []
    for key in keys:
        try:
            res = r.xautoclaim(key, group, consumer, min_idle_time=min_idle_ms,
                               start_id="0-0", count=count)
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


def group_info(r: RedisClient, key: str, group: str) -> dict[str, Any] | None:
    """XINFO GROUPS of ``key`` for ``group``; None without the stream or the group."""
    try:
        groups: list[dict[str, Any]] = r.xinfo_groups(key)
    except ResponseError:
        return None
    return next((g for g in groups if field_text(g.get("name")) == group), None)


def group_backlog(r: RedisClient, key: str, group: str) -> int:
    """Entries of the stream waiting for ``group``: lag plus pending, and never more than
    the stream holds (right after ``trim_acked``: the pending entries, the unread ones and
    the acked ones between). ``MAXLEN`` trimming of entries never read leaves Redis's lag
    (entries added less entries read) counting them, and a sweep that believed it saw a full
    stream would never re-dispatch their jobs (chaos ``overload`` at 10 minutes: 80,083 jobs
    stranded behind an empty stream with a lag of 80,598)."""
    info = group_info(r, key, group)
    if info is None:
        return 0
    length = int(r.xlen(key))
    lag = info.get("lag")
    if lag is None:  # unknown after XDEL: the whole stream
        return length
    return min(int(lag) + int(info.get("pending") or 0), length)


def trim_acked(r: RedisClient, keys: Sequence[str], group: str) -> int:
    """Drop the entries of ``keys`` every consumer has read and acked; returns how many."""
    removed = 0
    for key in keys:
        info = group_info(r, key, group)
        if info is None:
            continue
        pending = r.xpending(key, group)
        if pending.get("pending"):
            boundary = field_text(pending["min"])  # oldest unacked entry stays
        else:
            last = field_text(info.get("last-delivered-id") or b"0-0")
            ms, _, seq = last.partition("-")
            boundary = f"{ms}-{int(seq or 0) + 1}"  # all delivered entries are acked
        removed += int(r.xtrim(key, minid=boundary, approximate=False))
    return removed
