"""Heartbeat: extends every lease this worker holds, in one statement, every lease_s/3.

A lease the store no longer returns has been lost (reaped and claimed elsewhere): its
handler is cancelled, since nothing it did could be committed. ``cancel_requested`` set by
an operator cancels the handler too. If no heartbeat succeeds for a whole lease period the
leases have surely expired, so the handlers are stopped rather than run on unfenced.

Jobs whose handler has returned but whose finish the finisher has not written yet are
heartbeated too, so a slow finish (a hung XACK before it) never lets their leases lapse.
A heartbeat that hangs (a black-holed connection) counts as failing: a separate guard
stops the handlers once no heartbeat has succeeded for lease_s, counted from when the last
successful one was sent (the database extended the leases no earlier than that).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import trio

from gochatd.errors import StoreUnavailable
from gochatd.model import Lease
from gochatd.runner import StopReason

if TYPE_CHECKING:
    from gochatd.service import Worker


async def heartbeat_once(worker: Worker) -> None:
    snapshot = dict(worker.active)
    if not snapshot:
        return
    leases = [Lease(jid, a.claimed.fence, a.claimed.job.tenant_id) for jid, a in snapshot.items()]
    states = await worker.store.extend_leases(leases, worker.worker_id, worker.lease_s)
    held = {s.job_id: s for s in states}
    for job_id, active in snapshot.items():
        state = held.get(job_id)
        if state is None:
            active.stop(StopReason.LEASE_LOST)
        elif state.cancel_requested:
            active.stop(StopReason.CANCELLED)


async def heartbeat_loop(worker: Worker) -> None:
    last_ok = [trio.current_time()]  # when the last successful heartbeat was sent
    sent = last_ok[0]
    async with trio.open_nursery() as nursery:
        nursery.start_soon(_lease_guard, worker, last_ok)
        while True:
            # Every lease_s/3, and at once after a heartbeat that took longer than that.
            await trio.sleep_until(sent + max(0.05, worker.lease_s / 3))
            sent = trio.current_time()
            try:
                await heartbeat_once(worker)
                last_ok[0] = max(last_ok[0], sent)
            except StoreUnavailable as exc:
                worker.transient_error("heartbeat", exc)


async def _lease_guard(worker: Worker, last_ok: list[float]) -> None:
    """Stops every handler once the leases must have expired, even while a heartbeat hangs."""
    while True:
        deadline = last_ok[0] + worker.lease_s
        if trio.current_time() < deadline:
            await trio.sleep_until(deadline)
            continue
        for active in list(worker.active.values()):
            active.stop(StopReason.LEASE_LOST)
        await trio.sleep(max(0.05, worker.lease_s / 3))
