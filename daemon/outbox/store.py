"""Outbox operations of the SQL stores, and the protocol they satisfy.

Replies reach ``reply_outbox`` only through ``finish_jobs`` (see the backends'
``_finish_jobs_with_replies``): in the same transaction as the job's fenced completion.
Everything here is the sender's and the operator's side. Every sender write is a
compare-and-set on (id, status = 'sending', lease_owner, attempts): after the reaper took a
lease back and another sender claimed the row, the old sender's writes match nothing.
"""

from __future__ import annotations

import json
import math
from collections.abc import Sequence
from typing import Any, Protocol

from gochatd.model import Finish, Outcome
from gochatd.outbox.model import OutboxFilter, OutboxMessage, OutboxStats, OutboxStatus
from gochatd.store.core import StoreCore
from gochatd.store.queries import OUTBOX_COLUMNS
from gochatd.store.rows import canonical_json, epoch_to_datetime

_TIME_COLUMNS = frozenset(
    {"next_attempt_at", "lease_expires_at", "created_at", "updated_at", "sent_at"}
)


class OutboxStore(Protocol):
    async def claim_outbox(
        self, channels: Sequence[str], limit: int, owner: str, lease_s: float
    ) -> list[OutboxMessage]:
        """Due pending rows of these channels -> sending, leased to ``owner``, attempt+1."""
        ...

    async def complete_outbox(
        self, message: OutboxMessage, owner: str, provider_message_id: str | None
    ) -> float | None:
        """sending -> sent; the delivery latency in seconds, or None if the lease is stale."""
        ...

    async def retry_outbox(
        self, message: OutboxMessage, owner: str, delay_s: float, error_class: str
    ) -> bool:
        """sending -> pending, due after ``delay_s``; False if the lease is stale."""
        ...

    async def fail_outbox(self, message: OutboxMessage, owner: str, error_class: str) -> bool:
        """sending -> dead; False if the lease is stale."""
        ...

    async def reap_outbox_leases(self, max_attempts: int, limit: int = 1000) -> list[int]:
        """Expired sending leases -> pending (dead when attempts are exhausted)."""
        ...

    async def get_outbox(self, message_id: int) -> OutboxMessage | None: ...
    async def list_outbox(self, flt: OutboxFilter) -> list[OutboxMessage]: ...
    async def requeue_outbox(self, message_id: int) -> OutboxMessage | None:
        """An operator's retry: dead -> pending now. None when the row is not dead."""
        ...

    async def outbox_stats(self) -> OutboxStats: ...


def reply_rows(finishes: Sequence[Finish]) -> list[tuple[int, str, str, str, str]]:
    """(job_id, channel, recipient, body JSON, dedupe_key) of every completion's replies."""
    return [
        (f.job_id, r.channel, r.recipient, canonical_json(r.body), r.dedupe_key)
        for f in finishes if f.outcome is Outcome.COMPLETED
        for r in f.replies
    ]


class SqlOutboxOps(StoreCore):
    """Mixed into ``SqlJobStore``; uses its ``_read``/``_write``/``_list``."""

    dialect: str

    def _outbox(self, row: Sequence[Any]) -> OutboxMessage:
        values = dict(zip(OUTBOX_COLUMNS, row, strict=True))
        if self.dialect == "sqlite":
            for name in _TIME_COLUMNS:
                values[name] = epoch_to_datetime(values[name])
        body = values["body"]
        if isinstance(body, str | bytes):
            try:
                body = json.loads(body)
            except (ValueError, RecursionError):
                body = {}
        values["body"] = body if isinstance(body, dict) else {}
        values["status"] = OutboxStatus(values["status"])
        return OutboxMessage(**values)

    @staticmethod
    def _fence(message: OutboxMessage, owner: str) -> dict[str, Any]:
        return {"id": message.id, "owner": owner, "attempt": message.attempts}

    async def claim_outbox(
        self, channels: Sequence[str], limit: int, owner: str, lease_s: float
    ) -> list[OutboxMessage]:
        if limit <= 0 or not channels:
            return []
        rows = await self._write("claim_outbox", {
            "channels": self._list(list(channels)), "limit": limit, "owner": owner,
            "lease_s": lease_s,
        })
        return sorted((self._outbox(r) for r in rows), key=lambda m: m.id)

    async def complete_outbox(
        self, message: OutboxMessage, owner: str, provider_message_id: str | None
    ) -> float | None:
        rows = await self._write("complete_outbox", {
            **self._fence(message, owner), "provider_message_id": provider_message_id,
        })
        if not rows:
            return None
        latency = rows[0][0]
        return max(0.0, float(latency)) if latency is not None and math.isfinite(latency) else 0.0

    async def retry_outbox(
        self, message: OutboxMessage, owner: str, delay_s: float, error_class: str
    ) -> bool:
        rows = await self._write("retry_outbox", {
            **self._fence(message, owner), "delay_s": max(0.0, delay_s),
            "error_class": error_class,
        })
        return bool(rows)

    async def fail_outbox(self, message: OutboxMessage, owner: str, error_class: str) -> bool:
        rows = await self._write("fail_outbox", {
            **self._fence(message, owner), "error_class": error_class,
        })
        return bool(rows)

    async def reap_outbox_leases(self, max_attempts: int, limit: int = 1000) -> list[int]:
        rows = await self._write(
            "reap_outbox_leases", {"max_attempts": max_attempts, "limit": limit}
        )
        return sorted(int(r[0]) for r in rows)

    async def get_outbox(self, message_id: int) -> OutboxMessage | None:
        rows = await self._read("get_outbox", {"id": message_id})
        return self._outbox(rows[0]) if rows else None

    async def list_outbox(self, flt: OutboxFilter) -> list[OutboxMessage]:
        rows = await self._read("list_outbox", {
            "status": flt.status.value if flt.status else None,
            "tenant_id": flt.tenant_id,
            "channel": flt.channel,
            "after_id": flt.after_id,
            "limit": flt.limit,
        })
        return [self._outbox(r) for r in rows]

    async def requeue_outbox(self, message_id: int) -> OutboxMessage | None:
        rows = await self._write("requeue_outbox", {"id": message_id})
        return self._outbox(rows[0]) if rows else None

    async def outbox_stats(self) -> OutboxStats:
        rows = await self._read("outbox_stats", {})
        counts = {OutboxStatus(r[0]): int(r[1]) for r in rows}
        oldest: float | None = None
        for r in rows:
            if r[0] == OutboxStatus.PENDING and r[2] is not None and math.isfinite(r[2]):
                oldest = max(0.0, float(r[2]))
        return OutboxStats(counts=counts, oldest_pending_age_s=oldest)


__all__ = ["OutboxStore", "SqlOutboxOps", "reply_rows"]
