"""What one consumer group has left in a stream: its backlog (lag plus pending) and the
entries every consumer has read and acked, which trimming removes. Plain functions over one
synchronous redis-py client, run by ``RedisStreams`` as units of work."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from redis.exceptions import ResponseError

from gochatd.dispatch.entries import field_text
from gochatd.dispatch.redis_client import RedisClient


def group_info(r: RedisClient, key: str, group: str) -> dict[str, Any] | None:
    """XINFO GROUPS of ``key`` for ``group``; None without the stream or the group."""
    try:
        groups: list[dict[str, Any]] = r.xinfo_groups(key)
    except ResponseError:
        return None
    return next((g for g in groups if field_text(g.get("name")) == group), None)


def group_backlog(r: RedisClient, key: str, group: str) -> int:
    """Entries of the stream waiting for ``group``: lag plus pending."""
    info = group_info(r, key, group)
    if info is None:
        return 0
    lag = info.get("lag")
    if lag is None:  # unknown after deletions: assume the whole stream
        lag = r.xlen(key)
    return int(lag) + int(info.get("pending") or 0)


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
