"""Periodic jobs: enqueue each due slot once across the fleet, then sleep until the next.

Every daemon runs this loop. Each round reads the database clock and the slot records; for
each periodic job whose latest due slot is past its record, ``plan_slot`` decides (on time,
or missed and caught up or skipped) and ``claim_periodic_slot`` moves the record and
enqueues the job in one transaction: of several daemons waking for one slot, exactly one
moves the record. A draining or stopping daemon leaves the slots to the rest of the fleet
(a slot nobody took counts as missed). Paused queues still receive their jobs, which wait
there like any other.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import NoReturn

import trio

from gochatd.client.client import validate_enqueue
from gochatd.errors import ConfigError, InvalidJob, StoreUnavailable
from gochatd.model import EnqueueRequest, Job
from gochatd.obs.counters import Counters
from gochatd.obs.logs import get_logger
from gochatd.periodic_jobs.specs import PeriodicSpec, plan_slot, slot_text
from gochatd.store import JobStore
from gochatd.worker.lifecycle import Lifecycle
from gochatd.worker.registry import Registry

#: Look again at least this often (a reload, a clock step, another daemon's record).
MAX_WAIT_S = 30.0
#: Wake this long after a slot's time, so the database clock has certainly reached it.
WAKE_LATE_S = 0.01
#: While draining, look this often whether the drain ended (POST /v1/resume).
PAUSED_RECHECK_S = 0.5


@dataclass(frozen=True, slots=True)
class Enqueued:
    spec: PeriodicSpec
    slot: datetime
    job: Job | None  # None: the slot was skipped, or its key already named a job
    missed: bool


def slot_request(spec: PeriodicSpec, slot: datetime, registry: Registry,
                 max_payload_bytes: int) -> EnqueueRequest:
    handler = registry.get(spec.job_type)
    return validate_enqueue(
        spec.job_type, spec.payload,
        queue=spec.queue or (handler.queue if handler else None),
        tenant_id=spec.tenant_id, idempotency_key=spec.idempotency_key(slot),
        scheduled_at=slot, delay_s=None,
        max_attempts=spec.max_attempts or (handler.max_attempts if handler else None),
        priority=0, traceparent=None, max_payload_bytes=max_payload_bytes,
    )


def checked_specs(specs: Sequence[PeriodicSpec], registry: Registry,
                  max_payload_bytes: int) -> list[PeriodicSpec]:
    """Refuse at start (exit 2) what would fail every round: a payload over the limit."""
    for spec in specs:
        try:
            slot_request(spec, datetime.now(UTC), registry, max_payload_bytes)
        except InvalidJob as exc:
            raise ConfigError(f"periodic {spec.job_type}: {exc}") from None
    return list(specs)


async def run_once(
    store: JobStore, specs: Sequence[PeriodicSpec], registry: Registry, max_payload_bytes: int
) -> tuple[list[Enqueued], float]:
    """One round: the slots this daemon took, and seconds until the next slot is due."""
    now = await store.database_now()
    last = await store.periodic_slots()
    taken: list[Enqueued] = []
    for spec in specs:
        plan = plan_slot(spec, last.get(spec.name), now)
        if plan is None:
            continue
        request = (
            slot_request(spec, plan.slot, registry, max_payload_bytes) if plan.enqueue else None
        )
        claim = await store.claim_periodic_slot(spec.name, plan.slot, request)
        if claim.claimed:
            taken.append(Enqueued(spec, plan.slot, claim.job, plan.missed))
    next_slot = min(spec.schedule.next_after(now) for spec in specs)
    return taken, (next_slot - now).total_seconds()


@dataclass(frozen=True, slots=True)
class PeriodicResult:
    taken: list[Enqueued]
    wait_s: float  # until the next slot is due (bounded by MAX_WAIT_S)


class PeriodicEnqueuer:
    def __init__(self, specs: Sequence[PeriodicSpec], *, store: JobStore, registry: Registry,
                 max_payload_bytes: int, lifecycle: Lifecycle, counters: Counters,
                 on_enqueued: Callable[[Job], None], worker_id: str) -> None:
        self.specs = list(specs)
        self._store = store
        self._registry = registry
        self._max_payload_bytes = max_payload_bytes
        self._lifecycle = lifecycle
        self._counters = counters
        self._on_enqueued = on_enqueued
        self._log = get_logger(worker_id=worker_id)

    async def run_once(self) -> PeriodicResult:
        taken, due_in_s = await run_once(
            self._store, self.specs, self._registry, self._max_payload_bytes)
        self._counters.inc("periodic_rounds")
        for item in taken:
            self._report(item)
        return PeriodicResult(taken, min(MAX_WAIT_S, max(0.0, due_in_s) + WAKE_LATE_S))

    async def run(self, task_status: trio.TaskStatus[None] = trio.TASK_STATUS_IGNORED
                  ) -> NoReturn:
        task_status.started()
        while True:
            wait_s = PAUSED_RECHECK_S
            if not (self._lifecycle.stopping or self._lifecycle.draining):
                try:
                    wait_s = (await self.run_once()).wait_s
                except StoreUnavailable as exc:
                    self._counters.transient_error("periodic_failed", exc)
                    wait_s = 1.0
                except InvalidJob as exc:  # e.g. a payload over the max_payload_bytes setting
                    self._log.error("periodic_invalid", error=str(exc))
            await trio.sleep(wait_s)

    def _report(self, item: Enqueued) -> None:
        slot = slot_text(item.slot)
        if item.job is not None:
            self._counters.inc("periodic_enqueued")
            self._log.info("periodic_enqueued", job_type=item.spec.job_type, slot=slot,
                           job_id=item.job.id, missed=item.missed)
            self._on_enqueued(item.job)  # wakes this daemon's intake at once
        elif item.missed and item.spec.catch_up == "skip":
            self._counters.inc("periodic_skipped")
            self._log.info("periodic_skipped", job_type=item.spec.job_type, slot=slot)
