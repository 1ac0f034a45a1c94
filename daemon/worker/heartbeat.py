"""Heartbeat: extends every lease this worker holds, in one statement, every lease_s/3.

A lease the store no longer returns has been lost (reaped and claimed elsewhere): its
handler is cancelled, since nothing it did could be committed. ``cancel_requested`` set by
an operator cancels the handler too. If no heartbeat succeeds for most of a lease period
the leases are about to expire, so the handlers are stopped rather than run on unfenced.

Jobs whose handler has returned but whose finish the finisher has not written yet are
heartbeated too, so a slow finish (a hung XACK before it) never lets their leases lapse.
A heartbeat that hangs (a black-holed connection) counts as failing: a separate guard
stops the handlers once no heartbeat has succeeded for ``lease_s`` less a margin
(``STOP_MARGIN_SHARE`` of it), counted from when the last successful one was sent (the
database extended the leases no earlier than that). The margin is the handlers' time to
unwind: a lease the database lets expire is reaped and claimed elsewhere within
milliseconds, and a guard that fired at the expiry itself let the old handler run on beside
the new one (chaos ``pg_partition``: 129 ms on a loaded machine).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import NoReturn

import trio

from gochatd.errors import StoreUnavailable
from gochatd.model import Lease
from gochatd.obs.counters import Counters
from gochatd.store import JobStore
from gochatd.worker.pool import ActiveJobs
from gochatd.worker.runner import StopReason

#: The share of a lease the guard leaves when it stops the handlers: after the heartbeats
#: at 1/3 and 2/3 of it have been tried, before the lease can expire.
STOP_MARGIN_SHARE = 1 / 6


@dataclass(frozen=True, slots=True)
class HeartbeatResult:
    extended: int
    lost: int
    cancelled: int


class Heartbeat:
    def __init__(self, *, store: JobStore, jobs: ActiveJobs, worker_id: str, lease_s: float,
                 counters: Counters) -> None:
        self._store = store
        self._jobs = jobs
        self._worker_id = worker_id
        self._lease_s = lease_s
        self._counters = counters
        #: When the last successful heartbeat was sent (trio clock).
        self._last_ok = 0.0

    async def run_once(self) -> HeartbeatResult:
        snapshot = self._jobs.snapshot()
        if not snapshot:
            return HeartbeatResult(0, 0, 0)
        leases = [Lease(jid, a.claimed.fence, a.claimed.job.tenant_id)
                  for jid, a in snapshot.items()]
        states = await self._store.extend_leases(leases, self._worker_id, self._lease_s)
        held = {s.job_id: s for s in states}
        lost = cancelled = 0
        for job_id, active in snapshot.items():
            state = held.get(job_id)
            if state is None:
                active.stop(StopReason.LEASE_LOST)
                lost += 1
            elif state.cancel_requested:
                active.stop(StopReason.CANCELLED)
                cancelled += 1
        return HeartbeatResult(len(held), lost, cancelled)

    async def run(self, task_status: trio.TaskStatus[None] = trio.TASK_STATUS_IGNORED
                  ) -> NoReturn:
        self._last_ok = sent = trio.current_time()
        async with trio.open_nursery() as nursery:
            nursery.start_soon(self._lease_guard)
            task_status.started()
            while True:
                # Every lease_s/3, and at once after a heartbeat that took longer than that.
                await trio.sleep_until(sent + max(0.05, self._lease_s / 3))
                sent = trio.current_time()
                try:
                    await self.run_once()
                    self._last_ok = max(self._last_ok, sent)
                except StoreUnavailable as exc:
                    self._counters.transient_error("heartbeat_failed", exc)
        raise AssertionError("unreachable")

    async def _lease_guard(self) -> None:
        """Stops every handler before the leases can expire, even while a heartbeat
        hangs."""
        stop_after_s = self._lease_s * (1 - STOP_MARGIN_SHARE)
        while True:
            deadline = self._last_ok + stop_after_s
            if trio.current_time() < deadline:
                await trio.sleep_until(deadline)
                continue
            self._jobs.stop_all(StopReason.LEASE_LOST)
            await trio.sleep(max(0.05, self._lease_s / 3))
