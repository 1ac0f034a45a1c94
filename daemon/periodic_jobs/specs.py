"""Periodic jobs: what to enqueue on a schedule, and which slot is due.

Declared with ``@gochatd.periodic("*/5 * * * *", job_type=..., queue=...)`` or in the config
(``periodic:``). A *slot* is one scheduled time. Each slot is enqueued at most once across the
fleet: the daemon that moves the slot record (``gochatd_periodic_slots``) forward enqueues the
job in the same transaction, with the idempotency key ``{job_type}:{slot}`` and
``scheduled_at = slot``. The loop is ``loop.py``.

Missed slots. A slot is *on time* while the database clock is at most ``GRACE_S`` past it:
it is enqueued. A slot older than that was missed (every daemon was down or draining);
``catch_up`` decides: ``skip`` (the default, as in Oban and Sidekiq-cron) records it and
waits for the next one, ``latest`` enqueues the most recent missed slot once (never the whole
backlog). A periodic job the fleet has never seen starts with its next on-time slot.
"""

from __future__ import annotations

import math
import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from typing import Any, Protocol

from gochatd.config.fields import mapping_value
from gochatd.periodic_jobs.cron import CronError, parse_cron
from gochatd.worker.registry import JOB_TYPE_RE, QUEUE_RE, REGISTRY, Handler, HandlerSpec

#: How late (database clock) a slot may still be enqueued when catch_up is ``skip``.
GRACE_S = 60.0
CATCH_UP = ("skip", "latest")
_EVERY = re.compile(r"^\s*(\d+(?:\.\d+)?)\s*(s|m|h|d)?\s*$")
_UNIT_S = {"s": 1, "m": 60, "h": 3600, "d": 86400}
_KEYS = frozenset({"cron", "every", "tz", "queue", "payload", "tenant_id", "catch_up",
                   "max_attempts"})


class Schedule(Protocol):
    def describe(self) -> str: ...
    def next_after(self, moment: datetime) -> datetime: ...
    def prev_at_or_before(self, moment: datetime) -> datetime | None: ...


@dataclass(frozen=True, slots=True)
class EverySchedule:
    """Every ``period_s`` seconds, aligned to the Unix epoch so every daemon computes the
    same slots without talking to each other."""

    period_s: int

    def describe(self) -> str:
        return f"every {self.period_s}s"

    def prev_at_or_before(self, moment: datetime) -> datetime | None:
        epoch = math.floor(moment.timestamp() / self.period_s) * self.period_s
        return datetime.fromtimestamp(epoch, UTC)

    def next_after(self, moment: datetime) -> datetime:
        prev = self.prev_at_or_before(moment)
        assert prev is not None
        return prev + timedelta(seconds=self.period_s)


def parse_every(raw: Any) -> EverySchedule:
    """``300``, ``300s``, ``5m``, ``1h``, ``1d``: a whole number of seconds, 1 s to 366 days."""
    if isinstance(raw, bool | Mapping | list):
        raise ValueError("every: expected a duration such as 300s, 5m, 1h or 1d")
    match = _EVERY.match(str(raw))
    if not match:
        raise ValueError(f"every: {str(raw)[:40]!r} is not a duration such as 300s, 5m, 1h or 1d")
    seconds = float(match.group(1)) * _UNIT_S[match.group(2) or "s"]
    if not seconds.is_integer() or not 1 <= seconds <= 366 * 86400:
        raise ValueError("every: expected a whole number of seconds from 1s to 366d")
    return EverySchedule(int(seconds))


@dataclass(frozen=True)
class PeriodicSpec:
    job_type: str
    schedule: Schedule
    queue: str | None = None  # None: the handler's queue, else "default"
    payload: dict[str, Any] = field(default_factory=dict)
    tenant_id: str = "default"
    catch_up: str = "skip"
    max_attempts: int | None = None
    source: str = "decorator"  # or "config"

    @property
    def name(self) -> str:
        """The slot record's key: one periodic entry per job type."""
        return self.job_type

    def idempotency_key(self, slot: datetime) -> str:
        return f"{self.job_type}:{slot_text(slot)}"


def slot_text(slot: datetime) -> str:
    return slot.astimezone(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


@dataclass(frozen=True, slots=True)
class SlotPlan:
    slot: datetime
    enqueue: bool  # False: record the slot as handled (skipped) without a job
    missed: bool


def plan_slot(spec: PeriodicSpec, last_slot: datetime | None, now: datetime) -> SlotPlan | None:
    """What to do now: nothing (None), or move the record to the latest due slot and maybe
    enqueue it. Pure; ``now`` is the database clock."""
    slot = spec.schedule.prev_at_or_before(now)
    if slot is None or (last_slot is not None and slot <= last_slot):
        return None
    missed = (now - slot).total_seconds() > GRACE_S
    enqueue = not missed or (spec.catch_up == "latest" and last_slot is not None)
    return SlotPlan(slot, enqueue, missed)


# -- declaring -------------------------------------------------------------------------------


class PeriodicRegistry:
    def __init__(self) -> None:
        self._specs: dict[str, PeriodicSpec] = {}

    def add(self, spec: PeriodicSpec) -> None:
        self._specs[spec.job_type] = spec

    def remove(self, job_type: str) -> None:
        self._specs.pop(job_type, None)

    def specs(self) -> list[PeriodicSpec]:
        return [self._specs[k] for k in sorted(self._specs)]


#: The process-wide table that ``@gochatd.periodic`` writes to.
PERIODIC = PeriodicRegistry()


def make_spec(job_type: str, entry: Mapping[str, Any], source: str) -> PeriodicSpec:
    """Validate one declaration; ValueError names the bad field."""
    if not isinstance(job_type, str) or not JOB_TYPE_RE.match(job_type) or len(job_type) > 200:
        raise ValueError(f"{job_type!r} is not a job type")
    unknown = sorted(set(entry) - _KEYS)
    if unknown:
        raise ValueError(f"{job_type}: unknown key {unknown[0]!r} (allowed: {', '.join(sorted(_KEYS))})")
    has_cron, has_every = entry.get("cron") is not None, entry.get("every") is not None
    if has_cron == has_every:
        raise ValueError(f"{job_type}: give exactly one of cron or every")
    if entry.get("tz") is not None and not has_cron:
        raise ValueError(f"{job_type}: tz: applies to cron schedules only (every counts seconds)")
    try:
        schedule: Schedule = (
            parse_cron(entry["cron"], entry.get("tz")) if has_cron else parse_every(entry["every"])
        )
    except CronError as exc:
        where = "" if str(exc).startswith("tz:") else "cron: "
        raise ValueError(f"{job_type}: {where}{exc}") from None
    except ValueError as exc:
        raise ValueError(f"{job_type}: {exc}") from None
    queue = entry.get("queue")
    if queue is not None and (not isinstance(queue, str) or not QUEUE_RE.match(queue)):
        raise ValueError(f"{job_type}: queue: expected 1-64 letters, digits, '_' or '-'")
    payload = entry.get("payload", {}) or {}
    if not isinstance(payload, dict):
        raise ValueError(f"{job_type}: payload: expected a mapping")
    tenant_id = entry.get("tenant_id", "default")
    if not isinstance(tenant_id, str) or not 1 <= len(tenant_id) <= 200:
        raise ValueError(f"{job_type}: tenant_id: expected 1-200 characters")
    catch_up = entry.get("catch_up", "skip")
    if catch_up not in CATCH_UP:
        raise ValueError(f"{job_type}: catch_up: expected skip or latest")
    max_attempts = entry.get("max_attempts")
    if max_attempts is not None and (
        isinstance(max_attempts, bool) or not isinstance(max_attempts, int)
        or not 1 <= max_attempts <= 1000
    ):
        raise ValueError(f"{job_type}: max_attempts: expected an integer in 1..1000")
    return PeriodicSpec(job_type, schedule, queue, dict(payload), tenant_id, catch_up,
                        max_attempts, source)


def periodic(
    cron: str | None = None,
    *,
    job_type: str,
    every: str | int | None = None,
    tz: str | None = None,
    queue: str | None = None,
    payload: dict[str, Any] | None = None,
    tenant_id: str = "default",
    catch_up: str = "skip",
    max_attempts: int | None = None,
) -> Callable[[Handler], Handler]:
    """Enqueue ``job_type`` on a schedule and, unless it already has one, register the
    decorated function as its handler::

        @gochatd.periodic("*/5 * * * *", job_type="sla:trigger_accounts", queue="scheduled_jobs")
        async def trigger_accounts(ctx: gochatd.JobContext) -> None: ...

    ``tz`` (an IANA name such as ``Europe/Berlin``) evaluates ``cron`` on that zone's wall
    clock (docs/periodic.md); without it, cron is UTC."""
    entry = {"cron": cron, "every": every, "tz": tz, "queue": queue, "payload": payload or {},
             "tenant_id": tenant_id, "catch_up": catch_up, "max_attempts": max_attempts}
    spec = make_spec(job_type, entry, "decorator")

    def register(fn: Handler) -> Handler:
        if REGISTRY.get(job_type) is None:
            REGISTRY.add(HandlerSpec(job_type, fn, queue or "default",
                                     max_attempts=max_attempts or 25))
        PERIODIC.add(spec)
        return fn

    return register


def parse_periodic_config(raw: Any) -> dict[str, dict[str, Any]]:
    """The ``periodic`` config key: a mapping of job type -> {cron|every, tz, queue, payload,
    tenant_id, catch_up, max_attempts}. The environment variable holds the same as YAML/JSON."""
    raw = mapping_value(raw, "a mapping of job type -> {cron: ... | every: ...}")
    out: dict[str, dict[str, Any]] = {}
    for job_type, entry in raw.items():
        if not isinstance(entry, Mapping):
            raise ValueError(f"{job_type}: expected a mapping such as {{every: 300s}}")
        make_spec(str(job_type), entry, "config")  # validates
        out[str(job_type)] = {str(k): v for k, v in entry.items() if v is not None}
    return out


def effective_specs(configured: Mapping[str, Mapping[str, Any]]) -> list[PeriodicSpec]:
    """Decorator declarations, overridden per job type by the config (``periodic``)."""
    merged = {s.job_type: s for s in PERIODIC.specs()}
    for job_type, entry in configured.items():
        merged[job_type] = make_spec(job_type, entry, "config")
    return [merged[k] for k in sorted(merged)]
