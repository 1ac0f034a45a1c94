"""Backlog: in streams mode, claim the due jobs whose stream entries were acked without a
claim: those of capped tenants and queues (``tenants.<id>.max_running``,
``worker.queue_limits``), and those of job types another daemon cannot run.

A stream-delivered job refused for its tenant's or its queue's cap stays queued and its
entry is acked; so is an entry a daemon without the job's handler read
(docs/job-types.md). Without this loop such a job would wait for the sweep
(``sweep_interval_s``), and the sweep's new entry may again reach a daemon that cannot run
it. Every ``poll_interval_max_s``, while the worker streams and has free slots, it claims:

- while a live daemon of its queues lacks some of its job types (``FleetBeat.lacking_peers``):
  the due jobs of its queues that it can run, with the poller's claim (capped or not);
- the rate-limited queues (``worker.queue_rates``) whose full window has ended, or whose
  last claim took all it asked for: their due jobs, within the new window's rate
  (worker/rate_limit.py); with rates set it wakes at least once per shortest period;
- with caps: the capped tenants' and queues' due jobs (the capped claim), but those of
  rate-limited queues;
- else nothing (it only sleeps).

It runs beside the intake in the job pool (claimed jobs start there) and ends when the
worker stops claiming. In polling mode the poller already covers these jobs.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass

import trio

from gochatd.config.settings import Settings
from gochatd.errors import StoreUnavailable
from gochatd.obs.counters import Counters
from gochatd.store import JobStore
from gochatd.worker.lifecycle import Lifecycle, State
from gochatd.worker.pool import JobPool
from gochatd.worker.queues import QueueSelection
from gochatd.worker.rate_limit import RateLimitedClaims

#: Like a stream read's: a claim cancelled after its commit would strand running jobs.
CLAIM_SLACK_S = 15.0


@dataclass(frozen=True, slots=True)
class BacklogConfig:
    interval_s: float
    lease_s: float

    @classmethod
    def from_settings(cls, settings: Settings) -> BacklogConfig:
        return cls(settings.worker_poll_interval_max_s, settings.worker_lease_s)


@dataclass(frozen=True, slots=True)
class BacklogResult:
    claimed: int


class CappedBacklog:
    def __init__(self, config: BacklogConfig, *, store: JobStore, pool: JobPool,
                 queues: QueueSelection, lifecycle: Lifecycle, worker_id: str,
                 counters: Counters, peers: Callable[[], bool] = lambda: False,
                 claims: RateLimitedClaims | None = None) -> None:
        self.config = config
        self._store = store
        self._pool = pool
        self._queues = queues
        self._lifecycle = lifecycle
        self._worker_id = worker_id
        self._counters = counters
        #: Whether a live daemon of its queues lacks some of its types (FleetBeat).
        self._lacking_peers = peers
        #: The intake's claims (worker.queue_rates): rate-limited queues go through them.
        self._claims = claims or RateLimitedClaims(store, {})

    def reconfigure(self, settings: Settings) -> None:
        self.config = BacklogConfig.from_settings(settings)

    async def run_once(self) -> BacklogResult:
        free = self._pool.free_slots()
        if self._lifecycle.dispatch is not State.STREAMS or free <= 0:
            return BacklogResult(0)
        poll = self._lacking_peers()
        order = self._queues.order()
        reopened = self._claims.reopened(order)
        if not (poll or reopened or self._store.tenant_limits or self._store.queue_limits):
            return BacklogResult(0)
        if poll:
            reopened = order
        with trio.CancelScope(shield=True), trio.move_on_after(CLAIM_SLACK_S):
            claimed = await self._claims.claimer().claim_due_jobs(
                reopened, free, self._worker_id, self.config.lease_s) if reopened else []
            self._queues.charge(reopened, Counter(c.job.queue for c in claimed))
            if not poll and len(claimed) < free and (
                    self._store.tenant_limits or self._store.queue_limits):
                claimed.extend(await self._store.claim_capped_backlog(
                    self._claims.unlimited(self._queues.intake), free - len(claimed),
                    self._worker_id, self.config.lease_s))
            # Started even if a stop began meanwhile: the leases are ours, and the
            # runner's interrupt hands them back (the pool's nursery outlives the claims).
            self._pool.start_jobs(claimed)
            return BacklogResult(len(claimed))
        return BacklogResult(0)

    async def run(self) -> None:
        """Until the worker stops claiming (the stop cancels the claim scope too)."""
        while not self._lifecycle.stopping:
            await trio.sleep(self._claims.backlog_wait_s(self.config.interval_s))
            try:
                await self.run_once()
            except StoreUnavailable as exc:
                self._counters.transient_error("capped_backlog_failed", exc)
