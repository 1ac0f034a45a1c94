"""The outbox sender: claims due reply rows with a lease and delivers them, at most
``outbox.concurrency`` at a time; reaps expired sending leases (a sender that died
mid-delivery) so another daemon delivers them again with the same Idempotency-Key.

Woken at once when a local completion wrote replies (``Worker.outbox_wakeup``), otherwise it
polls every ``outbox.poll_s``: other daemons' completions and due retries are found there.
Deliveries run in this loop's own nursery, so they stop with it; a delivery cut short
leaves its row ``sending`` until the lease expires.
"""

from __future__ import annotations

import contextlib
import math
from typing import TYPE_CHECKING

import trio

from gochatd.errors import StoreUnavailable
from gochatd.logs import get_logger
from gochatd.outbox.model import OutboxMessage
from gochatd.outbox.providers import Provider, build_provider
from gochatd.outbox.sender import SendPolicy, deliver_one

# Importing registers the built-in provider.
from gochatd.outbox.webhook import WebhookProvider  # noqa: F401

if TYPE_CHECKING:
    from gochatd.service import Worker

REAP_BATCH = 1000
CLOSE_S = 2.0


def build_providers(worker: Worker) -> dict[str, Provider]:
    """One provider per configured channel; raises ConfigError (exit 2) for a bad one."""
    return {name: build_provider(cfg) for name, cfg in worker.settings.outbox_channels.items()}


class OutboxLoop:
    def __init__(self, worker: Worker, providers: dict[str, Provider]) -> None:
        self._worker = worker
        self._providers = providers
        self._limiter = trio.CapacityLimiter(worker.settings.outbox_concurrency)
        self._lease_s = worker.settings.outbox_lease_s
        # Reap often enough that a dead sender's rows wait at most ~1.25 leases.
        self._reap_interval_s = min(5.0, max(0.05, self._lease_s / 4))
        # The earliest retry this process scheduled (trio clock): woken for it, not the poll.
        self._next_retry_at = math.inf
        self._log = get_logger(component="outbox", worker_id=worker.worker_id)

    async def run(self, task_status: trio.TaskStatus[None] = trio.TASK_STATUS_IGNORED) -> None:
        for name, channel in self._worker.settings.outbox_channels.items():
            if channel.timeout_s >= self._lease_s:
                # Another daemon may reap the lease and deliver again while this one waits
                # (the receiver sees the same Idempotency-Key twice).
                self._log.warning("outbox_timeout_exceeds_lease", channel=name,
                                  timeout_s=channel.timeout_s, lease_s=self._lease_s)
        try:
            async with trio.open_nursery() as deliveries:
                task_status.started()
                await self._serve(deliveries)
        finally:
            await self._close_providers()

    async def _serve(self, deliveries: trio.Nursery) -> None:
        worker = self._worker
        channels = sorted(self._providers)
        next_reap = 0.0
        delay_s = 0.05
        while True:
            try:
                if trio.current_time() >= next_reap:
                    await self._reap()
                    next_reap = trio.current_time() + self._reap_interval_s
                free = int(self._limiter.available_tokens)
                claimed_at = trio.current_time()
                claimed = await worker.store.claim_outbox(
                    channels, free, worker.worker_id, self._lease_s
                ) if free else []
                delay_s = 0.05
            except StoreUnavailable as exc:
                worker.transient_error("outbox", exc)
                await trio.sleep(delay_s)
                delay_s = min(delay_s * 2, 2.0)
                continue
            for message in claimed:
                # One borrower per delivery, not per row: a row reaped and re-claimed while
                # its old delivery still unwinds must not collide with it.
                slot = object()
                self._limiter.acquire_on_behalf_of_nowait(slot)
                deliveries.start_soon(self._deliver, message, slot, name=f"outbox-{message.id}")
            if free == 0 or len(claimed) < free:
                # Everything due is taken (or no slot is free): wait for a completion that
                # wrote replies, a freed slot, or the poll.
                now = trio.current_time()
                if self._next_retry_at <= claimed_at:
                    self._next_retry_at = math.inf  # this pass's claim has taken it
                wait_s = min(worker.settings.outbox_poll_s, next_reap - now,
                             self._next_retry_at - now)
                await worker.outbox_wakeup.wait(max(0.0, wait_s))

    async def _reap(self) -> None:
        ids = await self._worker.store.reap_outbox_leases(
            self._worker.settings.outbox_max_attempts, REAP_BATCH
        )
        if ids:
            self._worker.counters["outbox_reaped"] += len(ids)
            self._log.warning("outbox_leases_reaped", outbox_ids=ids[:20], count=len(ids))

    async def _deliver(self, message: OutboxMessage, slot: object) -> None:
        worker = self._worker
        try:
            policy = SendPolicy(worker.worker_id, worker.settings.outbox_max_attempts)
            result = await deliver_one(
                message, self._providers[message.channel], worker.store, policy,
                worker.outbox_metrics, self._log,
            )
            worker.counters[f"outbox_{result.outcome}"] += 1
            if result.retry_in_s is not None:
                # Slightly late, so the row is due by the database clock when we look.
                due = trio.current_time() + result.retry_in_s + 0.01
                self._next_retry_at = min(self._next_retry_at, due)
        finally:
            self._limiter.release_on_behalf_of(slot)
            worker.outbox_wakeup.set()

    async def _close_providers(self) -> None:
        with trio.CancelScope(shield=True), trio.move_on_after(CLOSE_S):
            for provider in self._providers.values():
                with contextlib.suppress(Exception):
                    await provider.aclose()


async def outbox_loop(
    worker: Worker, providers: dict[str, Provider],
    task_status: trio.TaskStatus[None] = trio.TASK_STATUS_IGNORED,
) -> None:
    await OutboxLoop(worker, providers).run(task_status=task_status)
