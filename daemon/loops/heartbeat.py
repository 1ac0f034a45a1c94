"""Heartbeat: extends every lease this worker holds, in one statement, every lease_s/3.

A lease the store no longer returns has been lost (reaped and claimed elsewhere): its
handler is cancelled, since nothing it did could be committed. ``cancel_requested`` set by
an operator cancels the handler too. If no heartbeat succeeds for a whole lease period the
leases have surely expired, so the handlers are stopped rather than run on unfenced.
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
    snapshot = {jid: a for jid, a in worker.active.items() if not a.handler_done}
    if not snapshot:
        return
    leases = [Lease(jid, a.claimed.fence) for jid, a in snapshot.items()]
    states = await worker.store.extend_leases(leases, worker.worker_id, worker.lease_s)
    held = {s.job_id: s for s in states}
    for job_id, active in snapshot.items():
        state = held.get(job_id)
        if state is None:
            active.stop(StopReason.LEASE_LOST)
        elif state.cancel_requested:
            active.stop(StopReason.CANCELLED)


async def heartbeat_loop(worker: Worker) -> None:
    last_ok = trio.current_time()
    while True:
        await trio.sleep(max(0.05, worker.lease_s / 3))
        try:
            await heartbeat_once(worker)
            last_ok = trio.current_time()
        except StoreUnavailable as exc:
            worker.transient_error("heartbeat", exc)
            if trio.current_time() - last_ok >= worker.lease_s:
                for active in list(worker.active.values()):
                    active.stop(StopReason.LEASE_LOST)
