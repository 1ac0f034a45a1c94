"""Retention: finished jobs are deleted once their last change (``updated_at``, database
clock) is older than their class's retention: ``retention.completed_s`` (7 days),
``retention.dead_s`` and ``retention.cancelled_s`` (30 days); 0 keeps a class forever.

Each DELETE takes at most ``retention.batch`` rows (PostgreSQL: ``FOR UPDATE SKIP LOCKED``,
so it never waits on a row another writer holds) and a short pause follows every full batch,
so a large backlog never holds locks, or SQLite's write lock, for long. Every daemon runs
this loop; on PostgreSQL they skip each other's rows. Once a job is deleted its idempotency
key is free: the same key enqueues a new job. Stream entries are not kept here: the sweep
trims acknowledged entries (``loops/schedule.py``).

The same pass prunes the fleet dashboard's tables: per-minute finish counters older than
``COUNTS_KEEP_S`` (two days; the charts show at most one) and the rows of daemons whose
heartbeat stopped more than ``DAEMONS_KEEP_S`` ago (killed, never removed theirs).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import NoReturn

import trio

from gochatd.config.settings import Settings
from gochatd.loops.every import run_every
from gochatd.model import JobStatus
from gochatd.obs.counters import Counters
from gochatd.obs.logs import get_logger
from gochatd.obs.metrics import Metrics
from gochatd.store import JobStore

#: Between two full batches: lets claims and finishes through.
PAUSE_S = 0.05
#: Delete-tombstones (change tracking for ``gochatd move``) are kept this long: longer
#: than the longest read-only window a cutover accepts, so a rollback's check still sees
#: every delete the destination made.
TOMBSTONES_KEEP_S = 31 * 86400.0
#: Per-minute finish counters (loops/stats.py) are kept two days: the charts show one.
COUNTS_KEEP_S = 2 * 86400.0
#: A daemon row whose heartbeat stopped this long ago is deleted (loops/fleet.py).
DAEMONS_KEEP_S = 3600.0


@dataclass(frozen=True, slots=True)
class RetentionPolicy:
    completed_s: float
    dead_s: float
    cancelled_s: float
    batch: int

    @classmethod
    def from_settings(cls, settings: Settings) -> RetentionPolicy:
        return cls(settings.retention_completed_s, settings.retention_dead_s,
                   settings.retention_cancelled_s, settings.retention_batch)

    def classes(self) -> list[tuple[JobStatus, float]]:
        """(status, retention in seconds) for every class that is pruned at all."""
        every = [(JobStatus.COMPLETED, self.completed_s), (JobStatus.DEAD, self.dead_s),
                 (JobStatus.CANCELLED, self.cancelled_s)]
        return [(status, keep_s) for status, keep_s in every if keep_s > 0]


async def prune_once(
    store: JobStore,
    policy: RetentionPolicy,
    *,
    pause_s: float = PAUSE_S,
    on_batch: Callable[[JobStatus, int], None] | None = None,
) -> dict[JobStatus, int]:
    """One pass: every class down to what its retention keeps. Returns the rows deleted."""
    pruned: dict[JobStatus, int] = {}
    for status, keep_s in policy.classes():
        total = 0
        while True:
            deleted = await store.prune_finished_jobs(status, keep_s, policy.batch)
            total += deleted
            if deleted and on_batch is not None:
                on_batch(status, deleted)
            if deleted < policy.batch:
                break
            await trio.sleep(pause_s)
        pruned[status] = total
    while True:
        if await store.prune_change_tombstones(TOMBSTONES_KEEP_S, policy.batch) < policy.batch:
            break
        await trio.sleep(pause_s)
    await prune_fleet_tables(store, policy.batch, pause_s)
    return pruned


async def prune_fleet_tables(store: JobStore, batch: int, pause_s: float = PAUSE_S) -> None:
    """The dashboard's counters past ``COUNTS_KEEP_S`` and dead daemons' rows."""
    while True:
        if await store.prune_job_counts(COUNTS_KEEP_S, batch) < batch:
            break
        await trio.sleep(pause_s)
    await store.prune_daemons(DAEMONS_KEEP_S)


async def count_prunable(store: JobStore, policy: RetentionPolicy) -> dict[JobStatus, int]:
    """What ``prune_once`` would delete now (``gochatd jobs prune --dry-run``)."""
    return {status: await store.count_prunable_jobs(status, keep_s)
            for status, keep_s in policy.classes()}


@dataclass(frozen=True, slots=True)
class RetentionResult:
    pruned: dict[JobStatus, int]


class Retention:
    def __init__(self, policy: RetentionPolicy, interval_s: float, *, store: JobStore,
                 metrics: Metrics, counters: Counters, worker_id: str) -> None:
        self.policy = policy
        self.interval_s = interval_s
        self._store = store
        self._metrics = metrics
        self._counters = counters
        self._log = get_logger(worker_id=worker_id)

    def reconfigure(self, settings: Settings) -> None:
        self.policy = RetentionPolicy.from_settings(settings)
        self.interval_s = settings.retention_interval_s

    async def run_once(self) -> RetentionResult:
        pruned = await prune_once(self._store, self.policy, on_batch=self._counted)
        if any(pruned.values()):
            self._log.info("jobs_pruned", **{s.value: n for s, n in pruned.items()})
        return RetentionResult(pruned)

    def _counted(self, status: JobStatus, deleted: int) -> None:
        self._metrics.pruned.labels(status.value).inc(deleted)

    async def run(self, task_status: trio.TaskStatus[None] = trio.TASK_STATUS_IGNORED
                  ) -> NoReturn:
        await run_every("retention_failed", self.run_once, lambda: self.interval_s, self._counters,
                        task_status)
