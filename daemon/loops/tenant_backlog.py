"""Tenant backlog: in streams mode, claim the due jobs of tenants with ``max_running``.

A stream-delivered job refused for its tenant's cap stays queued and its entry is acked, so
without this loop it would wait for the sweep (``worker.redis.sweep_interval_s``). Every
``poll_interval_max_s`` (and whenever a slot frees), while the worker streams and has free
slots, it claims such jobs with the same capped claim as the poller. It runs only when some
tenant has a cap, inside the handler nursery (claimed jobs start there), and ends when the
worker stops claiming. In polling mode the poller already covers these jobs.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import trio

from gochatd.errors import StoreUnavailable

if TYPE_CHECKING:
    from gochatd.service import Worker

#: Like a stream read's: a claim cancelled after its commit would strand running jobs.
CLAIM_SLACK_S = 15.0


async def tenant_backlog_loop(worker: Worker) -> None:
    from gochatd.service import Mode

    while not worker.stopping:
        await trio.sleep(worker.settings.worker_poll_interval_max_s)
        free = worker.free_slots()
        if worker.mode is not Mode.STREAMS or free <= 0 or not worker.store.tenant_limits:
            continue
        try:
            with trio.CancelScope(shield=True), trio.move_on_after(CLAIM_SLACK_S):
                claimed = await worker.store.claim_tenant_backlog(
                    worker.intake_queues, free, worker.worker_id, worker.lease_s)
                # Started even if a stop began meanwhile: the leases are ours, and the
                # runner's interrupt hands them back (this loop runs in the handler nursery).
                worker.start_jobs(claimed)
        except StoreUnavailable as exc:
            worker.transient_error("tenant_backlog", exc)
