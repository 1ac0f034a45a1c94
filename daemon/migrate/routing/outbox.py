"""The reply outbox's operations of the routed store (migrate/routing/store.py): claims and reaps
on every active database, one message's writes where its tenant lives."""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Sequence
from typing import Any

from gochatd.migrate.routing.core import RouterBase
from gochatd.migrate.routing.view import concat
from gochatd.outbox.model import OutboxFilter, OutboxMessage, OutboxStats


class RoutedOutbox(RouterBase):
    # -- outbox ----------------------------------------------------------------------------

    async def claim_outbox(
        self, channels: Sequence[str], limit: int, owner: str, lease_s: float
    ) -> list[OutboxMessage]:
        claimed: list[OutboxMessage] = []
        for store in self.active():
            if len(claimed) >= limit:
                break
            claimed.extend(await store.claim_outbox(channels, limit - len(claimed), owner,
                                                    lease_s))
        return claimed

    async def complete_outbox(
        self, message: OutboxMessage, owner: str, provider_message_id: str | None
    ) -> float | None:
        return await self._for_tenant(
            message.tenant_id, lambda s: s.complete_outbox(message, owner, provider_message_id))

    async def retry_outbox(
        self, message: OutboxMessage, owner: str, delay_s: float, error_class: str
    ) -> bool:
        return await self._for_tenant(
            message.tenant_id, lambda s: s.retry_outbox(message, owner, delay_s, error_class))

    async def fail_outbox(self, message: OutboxMessage, owner: str, error_class: str) -> bool:
        return await self._for_tenant(
            message.tenant_id, lambda s: s.fail_outbox(message, owner, error_class))

    async def reap_outbox_leases(self, max_attempts: int, limit: int = 1000) -> list[int]:
        return concat(await self._each(lambda s: s.reap_outbox_leases(max_attempts, limit)))

    async def get_outbox(self, message_id: int) -> OutboxMessage | None:
        for store in self.active():
            message = await store.get_outbox(message_id)
            if message is not None:
                return message
        return None

    async def list_outbox(self, flt: OutboxFilter) -> list[OutboxMessage]:
        rows = concat(await self._each(lambda s: s.list_outbox(flt)))
        rows.sort(key=lambda m: m.id)
        return rows[:flt.limit]

    async def requeue_outbox(self, message_id: int) -> OutboxMessage | None:
        message = await self.get_outbox(message_id)
        if message is None:
            return None
        return await self._for_tenant(
            message.tenant_id, lambda s: s.requeue_outbox(message_id))

    async def outbox_stats(self) -> OutboxStats:
        parts = await self._each(lambda s: s.outbox_stats())
        if len(parts) == 1:
            return parts[0]
        counts: dict[Any, int] = defaultdict(int)
        for part in parts:
            for status, n in part.counts.items():
                counts[status] += n
        ages = [p.oldest_pending_age_s for p in parts if p.oldest_pending_age_s is not None]
        return OutboxStats(dict(counts), max(ages) if ages else None)

