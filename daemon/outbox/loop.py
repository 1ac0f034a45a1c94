"""The outbox sender: claims due reply rows with a lease and delivers them, at most
``outbox.concurrency`` at a time; reaps expired sending leases (a sender that died
mid-delivery) so another daemon delivers them again with the same Idempotency-Key.

Woken at once when a local completion wrote replies (``Wakeups.outbox``), otherwise it
polls every ``outbox.poll_s``: other daemons' completions and due retries are found there.
Deliveries run in this loop's own nursery, so they stop with it; a delivery cut short
leaves its row ``sending`` until the lease expires.
"""

from __future__ import annotations

import contextlib
import math
from collections.abc import Mapping
from dataclasses import dataclass
from typing import NoReturn

import trio

from gochatd.config.settings import Settings
from gochatd.errors import StoreUnavailable
from gochatd.obs.counters import Counters
from gochatd.obs.logs import get_logger
from gochatd.outbox.metrics import OutboxMetrics
from gochatd.outbox.model import OutboxMessage
from gochatd.outbox.providers import Provider, build_provider
from gochatd.outbox.sender import SendPolicy, deliver_one

# Importing registers the built-in provider.
from gochatd.outbox.webhook import WebhookProvider  # noqa: F401
from gochatd.store import JobStore
from gochatd.worker.wakeup import Wakeup

REAP_BATCH = 1000
CLOSE_S = 2.0


def build_providers(settings: Settings) -> dict[str, Provider]:
    """One provider per configured channel; raises ConfigError (exit 2) for a bad one."""
    return {name: build_provider(cfg) for name, cfg in settings.outbox_channels.items()}


@dataclass(frozen=True, slots=True)
class OutboxConfig:
    concurrency: int
    lease_s: float
    poll_s: float
    max_attempts: int
    timeouts_s: Mapping[str, float]  # channel -> its delivery timeout

    @classmethod
    def from_settings(cls, settings: Settings) -> OutboxConfig:
        return cls(settings.outbox_concurrency, settings.outbox_lease_s, settings.outbox_poll_s,
                   settings.outbox_max_attempts,
                   {name: c.timeout_s for name, c in settings.outbox_channels.items()})

    @property
    def reap_interval_s(self) -> float:
        """Often enough that a dead sender's rows wait at most ~1.25 leases."""
        return min(5.0, max(0.05, self.lease_s / 4))


@dataclass(frozen=True, slots=True)
class OutboxResult:
    reaped: int
    claimed: int
    free: int  # delivery slots free before the claim


class OutboxSender:
    def __init__(self, config: OutboxConfig, providers: dict[str, Provider], *,
                 store: JobStore, worker_id: str, wakeup: Wakeup, metrics: OutboxMetrics,
                 counters: Counters) -> None:
        self.config = config
        self._providers = providers
        self._store = store
        self._worker_id = worker_id
        self._wakeup = wakeup
        self._metrics = metrics
        self._counters = counters
        self._limiter = trio.CapacityLimiter(config.concurrency)
        self._next_reap = 0.0
        # The earliest retry this process scheduled (trio clock): woken for it, not the poll.
        self._next_retry_at = math.inf
        self._deliveries: trio.Nursery | None = None
        self._log = get_logger(component="outbox", worker_id=worker_id)

    def reconfigure(self, settings: Settings) -> None:
        fresh = OutboxConfig.from_settings(settings)
        # poll_s and max_attempts are reloadable; concurrency and lease_s are not.
        self.config = OutboxConfig(self.config.concurrency, self.config.lease_s, fresh.poll_s,
                                   fresh.max_attempts, self.config.timeouts_s)

    async def run(self, task_status: trio.TaskStatus[None] = trio.TASK_STATUS_IGNORED
                  ) -> NoReturn:
        for name, timeout_s in self.config.timeouts_s.items():
            if timeout_s >= self.config.lease_s:
                # Another daemon may reap the lease and deliver again while this one waits
                # (the receiver sees the same Idempotency-Key twice).
                self._log.warning("outbox_timeout_exceeds_lease", channel=name,
                                  timeout_s=timeout_s, lease_s=self.config.lease_s)
        try:
            async with trio.open_nursery() as deliveries:
                self._deliveries = deliveries
                task_status.started()
                await self._serve()
        finally:
            await self._close_providers()
        raise AssertionError("unreachable")

    async def _serve(self) -> NoReturn:
        delay_s = 0.05
        while True:
            claimed_at = trio.current_time()
            try:
                result = await self.run_once()
                delay_s = 0.05
            except StoreUnavailable as exc:
                self._counters.transient_error("outbox_failed", exc)
                await trio.sleep(delay_s)
                delay_s = min(delay_s * 2, 2.0)
                continue
            if result.free == 0 or result.claimed < result.free:
                # Everything due is taken (or no slot is free): wait for a completion that
                # wrote replies, a freed slot, or the poll.
                now = trio.current_time()
                if self._next_retry_at <= claimed_at:
                    self._next_retry_at = math.inf  # this pass's claim has taken it
                wait_s = min(self.config.poll_s, self._next_reap - now, self._next_retry_at - now)
                await self._wakeup.wait(max(0.0, wait_s))

    async def run_once(self) -> OutboxResult:
        """Reap expired sending leases when due; claim due rows up to the free slots and
        start one delivery each (in ``run``'s nursery)."""
        assert self._deliveries is not None, "run_once runs inside run()"
        reaped = 0
        if trio.current_time() >= self._next_reap:
            reaped = await self._reap()
            self._next_reap = trio.current_time() + self.config.reap_interval_s
        free = int(self._limiter.available_tokens)
        claimed = await self._store.claim_outbox(
            sorted(self._providers), free, self._worker_id, self.config.lease_s
        ) if free else []
        for message in claimed:
            # One borrower per delivery, not per row: a row reaped and re-claimed while
            # its old delivery still unwinds must not collide with it.
            slot = object()
            self._limiter.acquire_on_behalf_of_nowait(slot)
            self._deliveries.start_soon(self._deliver, message, slot, name=f"outbox-{message.id}")
        return OutboxResult(reaped, len(claimed), free)

    async def _reap(self) -> int:
        ids = await self._store.reap_outbox_leases(self.config.max_attempts, REAP_BATCH)
        if ids:
            self._counters.inc("outbox_leases_reaped", len(ids))
            self._log.warning("outbox_leases_reaped", outbox_ids=ids[:20], count=len(ids))
        return len(ids)

    async def _deliver(self, message: OutboxMessage, slot: object) -> None:
        try:
            policy = SendPolicy(self._worker_id, self.config.max_attempts)
            result = await deliver_one(
                message, self._providers[message.channel], self._store, policy,
                self._metrics, self._log,
            )
            self._counters.inc(f"outbox_{result.outcome}")
            if result.retry_in_s is not None:
                # Slightly late, so the row is due by the database clock when we look.
                due = trio.current_time() + result.retry_in_s + 0.01
                self._next_retry_at = min(self._next_retry_at, due)
        finally:
            self._limiter.release_on_behalf_of(slot)
            self._wakeup.set()

    async def _close_providers(self) -> None:
        with trio.CancelScope(shield=True), trio.move_on_after(CLOSE_S):
            for provider in self._providers.values():
                with contextlib.suppress(Exception):
                    await provider.aclose()
