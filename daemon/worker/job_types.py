"""Job types' defaults: what each daemon publishes for its handlers, and what producers get.

A handler's options (``@gochatd.job("t", queue=..., max_attempts=..., timeout_s=...)``) live
in the daemon that imports it. At start, before it claims anything, the daemon upserts one
row per registered handler into ``gochatd_job_types`` (the last writer wins; a row whose
values change is logged as ``job_type_defaults_changed`` with both values). Every producer
that leaves ``queue`` or ``max_attempts`` out then gets the published value: the client, the
CLI, the gateway and periodic jobs in their own INSERT, plain SQL on PostgreSQL through a
trigger. A type no daemon has published yet lands in ``default`` with 25 attempts. See
docs/job-types.md.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from typing import TYPE_CHECKING, Any

from gochatd.worker.registry import Registry
from gochatd.worker.runnable import RunnableTypes

if TYPE_CHECKING:
    from collections.abc import Mapping

    import structlog

    from gochatd.store.base import JobStore
    from gochatd.store.job_types import JobTypeStore
    from gochatd.worker.http_handlers import HttpRoute

#: What a producer gets for a type no daemon has published.
FALLBACK_QUEUE = "default"
FALLBACK_MAX_ATTEMPTS = 25


@dataclass(frozen=True, slots=True)
class JobTypeDefaults:
    """One handler's options as its daemon publishes them."""

    job_type: str
    queue: str = FALLBACK_QUEUE
    max_attempts: int = FALLBACK_MAX_ATTEMPTS
    timeout_s: float | None = None

    def describe(self) -> str:
        """``queue=low max_attempts=2 timeout_s=none``: one value of a log line."""
        timeout = "none" if self.timeout_s is None else f"{self.timeout_s:g}"
        return f"queue={self.queue} max_attempts={self.max_attempts} timeout_s={timeout}"


@dataclass(frozen=True, slots=True)
class PublishedJobType:
    """A row of ``gochatd_job_types``."""

    job_type: str
    queue: str
    max_attempts: int
    timeout_s: float | None
    updated_at: datetime
    published_by: str

    @property
    def defaults(self) -> JobTypeDefaults:
        return JobTypeDefaults(self.job_type, self.queue, self.max_attempts, self.timeout_s)

    def to_dict(self) -> dict[str, Any]:
        return {
            "job_type": self.job_type, "queue": self.queue, "max_attempts": self.max_attempts,
            "timeout_s": self.timeout_s, "updated_at": self.updated_at.isoformat(),
            "published_by": self.published_by,
        }


@dataclass(frozen=True, slots=True)
class JobTypeChange:
    """A publication that replaced different values (another daemon's, or an older
    release's of this one)."""

    before: PublishedJobType
    after: JobTypeDefaults


def handler_defaults(registry: Registry,
                     http_routes: Mapping[str, HttpRoute] | None = None) -> list[JobTypeDefaults]:
    """One entry per registered handler, and per exact-type HTTP route without one (queue
    ``default``, 25 attempts, the route's timeout), by job type. A ``prefix:*`` route
    names no type, so it publishes nothing."""
    found = {}
    for job_type in registry.job_types():
        spec = registry.get(job_type)
        assert spec is not None
        found[job_type] = JobTypeDefaults(job_type, spec.queue, spec.max_attempts,
                                          spec.timeout_s)
    for pattern, route in (http_routes or {}).items():
        if not pattern.endswith(":*") and pattern not in found:
            found[pattern] = JobTypeDefaults(pattern, timeout_s=route.timeout_s)
    return [found[t] for t in sorted(found)]


async def publish_handlers(
    store: JobTypeStore, registry: Registry, worker_id: str,
    log: structlog.typing.FilteringBoundLogger, *,
    http_routes: Mapping[str, HttpRoute] | None = None,
) -> list[JobTypeDefaults]:
    """Publish every handler's defaults (HTTP routes' too); one warning line per type whose
    published values this replaced. Returns what was published."""
    types = handler_defaults(registry, http_routes)
    for change in await store.publish_job_types(types, worker_id):
        log.warning(
            "job_type_defaults_changed", job_type=change.after.job_type,
            previous=change.before.defaults.describe(), previous_by=change.before.published_by,
            published=change.after.describe(),
            note="daemons disagree on this type's options (or a release changed them): "
                 "the last one to start wins",
        )
    log.info("job_types_published", count=len(types))
    return types


async def adopt_handlers(
    store: JobStore, registry: Registry, http_routes: Mapping[str, HttpRoute], worker_id: str,
    log: structlog.typing.FilteringBoundLogger,
) -> None:
    """Before a daemon's first claim: its claims take only the types it can run (its Python
    handlers and HTTP routes: runnable.py), and producers get their options from now on."""
    store.runnable = RunnableTypes.of(registry.job_types(), http_routes)
    await publish_handlers(store, registry, worker_id, log, http_routes=http_routes)
