"""The fleet dashboard's operations of the routed store (migrate/routing/store.py): the counters and
the daemons' rows are not tenant data, so they live on the home database alone, whatever
the routes say (a daemon always has it open)."""

from __future__ import annotations

from collections.abc import Sequence

from gochatd.migrate.routing.outbox import RoutedOutbox
from gochatd.migrate.routing.view import concat
from gochatd.store.fleet import DaemonBeat, DaemonRequest, DaemonRow, FinishCounts, MinuteCounts
from gochatd.worker.runnable import WaitingJobs


class RoutedFleet(RoutedOutbox):
    async def waiting_job_types(self) -> list[WaitingJobs]:
        """Summed over the databases that hold tenants' jobs now."""
        merged: dict[tuple[str, str], WaitingJobs] = {}
        for part in concat(await self._each(lambda s: s.waiting_job_types())):
            key = (part.job_type, part.queue)
            before = merged.get(key)
            merged[key] = part if before is None else WaitingJobs(
                part.job_type, part.queue, before.jobs + part.jobs,
                max(before.oldest_age_s, part.oldest_age_s))
        return list(merged.values())

    async def add_job_counts(self, counts: Sequence[FinishCounts]) -> None:
        await self.home.add_job_counts(counts)

    async def job_counts(self, minutes: int, by: str | None) -> list[MinuteCounts]:
        return await self.home.job_counts(minutes, by)

    async def prune_job_counts(self, older_than_s: float, limit: int) -> int:
        return await self.home.prune_job_counts(older_than_s, limit)

    async def upsert_daemon(self, beat: DaemonBeat) -> DaemonRequest | None:
        return await self.home.upsert_daemon(beat)

    async def list_daemons(self) -> list[DaemonRow]:
        return await self.home.list_daemons()

    async def request_daemon(self, daemon_id: str, action: str) -> bool:
        return await self.home.request_daemon(daemon_id, action)

    async def clear_daemon_request(self, daemon_id: str, seq: int) -> bool:
        return await self.home.clear_daemon_request(daemon_id, seq)

    async def remove_daemon(self, daemon_id: str) -> bool:
        return await self.home.remove_daemon(daemon_id)

    async def prune_daemons(self, older_than_s: float) -> int:
        return await self.home.prune_daemons(older_than_s)
