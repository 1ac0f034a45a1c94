"""The public client: enqueue (one job or a batch), inspect and cancel jobs.

Enqueueing is validation, the idempotent insert, then an XADD once the row commits. A failed
XADD never fails an enqueue: the row is the truth, and the scheduler's sweep re-dispatches
it. Usable from any Trio code::

    async with gochatd.Client("postgresql://…", "redis://…") as client:
        job = await client.enqueue("message:send_reply", {"message_id": 7}, queue="high")
        results = await client.enqueue_many(
            [gochatd.NewJob("message:send_reply", {"message_id": n}) for n in range(1000)]
        )
"""

from __future__ import annotations

import contextlib
import dataclasses
from collections.abc import Callable, Mapping, Sequence
from datetime import datetime
from types import TracebackType
from typing import Any

import anyio

from gochatd.config_fields import DEFAULTS
from gochatd.dispatch.redis_streams import RedisStreams
from gochatd.errors import ConfigError, DispatchUnavailable
from gochatd.group_commit import GroupCommit
from gochatd.logs import get_logger
from gochatd.model import DispatchRef, EnqueueRequest, EnqueueResult, Job, JobFilter
from gochatd.new_job import NewJob
from gochatd.store import JobStore, open_routed_store
from gochatd.validation import MAX_BATCH, validate_batch, validate_enqueue, validate_filter

DISPATCH_RETRY_S = 5.0


class Client:
    """Enqueue, inspect and cancel jobs from Trio code.

    ``Client(database_url, redis_url=None)`` opens its own connections in ``async with`` and
    closes them on exit (it also opens the trio-asyncio loop if none is running). With a
    ``redis_url`` every new job that is due is XADDed to its queue's stream after commit,
    so an idle worker starts it within milliseconds; without one, workers are woken by the
    database (LISTEN/NOTIFY or SQLite's data_version). Pass ``store=`` (and ``streams=``)
    instead of URLs to share connections that are already open.
    """

    def __init__(
        self,
        database_url: str | None = None,
        redis_url: str | None = None,
        *,
        store: JobStore | None = None,
        streams: RedisStreams | None = None,
        max_payload_bytes: int = DEFAULTS["worker_max_payload_bytes"],
        stream_prefix: str = DEFAULTS["worker_redis_stream_prefix"],
        consumer_group: str = DEFAULTS["worker_redis_consumer_group"],
        redis_cluster: bool = DEFAULTS["redis_cluster"],
        on_enqueued: Callable[[Job], None] | None = None,
    ) -> None:
        if store is None and database_url is None:
            raise ConfigError("Client needs a database_url or a store")
        self._database_url = database_url
        self._redis_url = redis_url
        self._redis_cluster = redis_cluster
        self._stream_prefix = stream_prefix
        self._consumer_group = consumer_group
        self.store: JobStore | None = store
        self.streams = streams
        self.max_payload_bytes = max_payload_bytes
        self.on_enqueued = on_enqueued
        #: False after an XADD failed; enqueues then rely on the database wake-up instead,
        #: and XADD is tried again after DISPATCH_RETRY_S.
        self.dispatch_ok = True
        self._dispatch_retry_at = 0.0
        self._owned = contextlib.AsyncExitStack()
        self._group = GroupCommit(self._write_group)
        self._log = get_logger(component="client")

    async def __aenter__(self) -> Client:
        if self.store is None:
            assert self._database_url is not None
            store = open_routed_store(self._database_url)
            await store.open()
            self._owned.push_async_callback(store.close)
            self.store = store
        if self.streams is None and self._redis_url:
            streams = RedisStreams(
                self._redis_url, prefix=self._stream_prefix, group=self._consumer_group,
                consumer="client", maxlen=DEFAULTS["worker_redis_stream_maxlen"], block_s=1.0,
                cluster=self._redis_cluster,
            )
            await streams.open()
            self._owned.push_async_callback(streams.close)
            self.streams = streams
            await streams.check_url()  # a wrong URL is refused before anything is written
        return self

    async def __aexit__(
        self, et: type[BaseException] | None, ev: BaseException | None, tb: TracebackType | None
    ) -> None:
        await self._owned.aclose()

    def _store(self) -> JobStore:
        if self.store is None:
            raise RuntimeError("use 'async with Client(...)' before calling it")
        return self.store

    async def enqueue(
        self,
        job_type: str,
        payload: dict[str, Any] | None = None,
        *,
        queue: str | None = None,
        tenant_id: str = "default",
        idempotency_key: str | None = None,
        scheduled_at: datetime | None = None,
        delay_s: float | None = None,
        max_attempts: int | None = None,
        priority: int = 0,
        traceparent: str | None = None,
    ) -> Job:
        """Enqueue one job and return its row. Raises ``InvalidJob`` for bad input (nothing
        is written) and ``IdempotencyConflict`` when (tenant_id, idempotency_key) already
        names a different job; the same job again returns the existing row.

        ``queue`` and ``max_attempts`` left out: the handler's, when this process imported
        it; else the values a daemon published for the type when it started; else
        ``"default"`` and 25 (docs/job-types.md)."""
        request = validate_enqueue(
            job_type, payload, queue=queue, tenant_id=tenant_id, idempotency_key=idempotency_key,
            scheduled_at=scheduled_at, delay_s=delay_s, max_attempts=max_attempts,
            priority=priority, traceparent=traceparent, max_payload_bytes=self.max_payload_bytes,
        )
        if self._will_xadd():
            request = _with_dispatch(request)
        # Concurrent callers share one INSERT and one XADD pipeline (group commit).
        return (await self._group.submit(request)).job

    async def _write_group(self, requests: Sequence[EnqueueRequest]) -> list[EnqueueResult]:
        publisher = self._publisher()
        if len(requests) == 1:
            results = [await self._store().enqueue(requests[0], after_commit=publisher)]
        else:
            results = await self._store().enqueue_many(
                requests, raise_on_conflict=False, after_commit=publisher)
        self._after_commit(results, publisher)
        return results

    async def enqueue_many(
        self,
        requests: Sequence[NewJob | Mapping[str, Any]],
        *,
        raise_on_conflict: bool = True,
    ) -> list[EnqueueResult]:
        """Enqueue a batch (at most ``MAX_BATCH`` items) in one INSERT and one pipelined XADD.

        Every item is validated first: one bad item raises ``InvalidJob`` naming its index and
        field, and nothing is written. Returns one ``EnqueueResult`` per item, in order:
        ``.job`` is the row, ``.created`` is False when the item's idempotency key already
        named the same job (that row is returned). An item whose key names a different job is
        a conflict: by default the whole batch is rolled back and ``IdempotencyConflict``
        (with ``.index``) is raised; with ``raise_on_conflict=False`` the other items are
        written and that item's result has ``.conflict`` True (``.job`` is the holder).
        """
        batch = validate_batch(requests, self.max_payload_bytes, dispatch_now=self._will_xadd())
        if not batch:
            return []
        publisher = self._publisher()
        results = await self._store().enqueue_many(
            batch, raise_on_conflict=raise_on_conflict, after_commit=publisher)
        self._after_commit(results, publisher)
        return results

    def _will_xadd(self) -> bool:
        if not self.dispatch_ok and anyio.current_time() >= self._dispatch_retry_at:
            self.dispatch_ok = True
        return self.streams is not None and self.dispatch_ok

    def _publisher(self) -> _Publisher | None:
        return _Publisher(self.streams) if self.streams is not None else None

    def _after_commit(
        self, results: Sequence[EnqueueResult], publisher: _Publisher | None
    ) -> None:
        """After the write (and its XADD, done on the store's thread): note a failed XADD,
        then tell the owner (wake-ups)."""
        if publisher is not None and publisher.failed:
            refs = publisher.failed
            self.dispatch_ok = False
            self._dispatch_retry_at = anyio.current_time() + DISPATCH_RETRY_S
            self._log.warning("xadd_failed", job_id=refs[0].job_id, jobs=len(refs),
                              queue=refs[0].queue, note="the sweep will re-dispatch it")
        if self.on_enqueued is not None:
            for result in results:
                if result.created:
                    self.on_enqueued(result.job)

    async def get_job(self, job_id: int) -> Job | None:
        """The job's current row, or None if there is no such job (or it was pruned)."""
        return await self._store().get_job(job_id)

    async def list_jobs(self, flt: JobFilter) -> list[Job]:
        """Jobs matching the filter, by id (page with ``JobFilter.after_id``). Raises
        ``InvalidJob`` for a filter value no job can have (``validate_filter``)."""
        return await self._store().list_jobs(validate_filter(flt))

    async def retry(self, job_id: int) -> Job:
        """Retry (requeue) a dead or cancelled job: back to queued, attempts reset
        (``InvalidTransition`` otherwise). The store calls it ``requeue_job``."""
        return await self._store().requeue_job(job_id)

    async def cancel(self, job_id: int) -> Job:
        """Cancel a job: a queued or retrying job becomes ``cancelled`` at once; a running one
        gets ``cancel_requested`` and its worker cancels the handler at the next heartbeat.
        Raises ``JobNotFound``, or ``InvalidTransition`` for a finished job."""
        return await self._store().cancel_job(job_id)


class _Publisher:
    """The store's ``after_commit`` for one write: XADDs the new, due rows on the store's
    connection thread, right after the commit (one thread hop for both). A failed XADD never
    fails the enqueue: the row is the truth, and the sweep re-dispatches it."""

    def __init__(self, streams: RedisStreams) -> None:
        self.streams = streams
        self.failed: list[DispatchRef] = []

    def __call__(self, results: Sequence[EnqueueResult]) -> None:
        refs = [DispatchRef(r.job.id, r.job.job_type, r.job.queue, r.job.tenant_id)
                for r in results if r.created and r.job.dispatched_at is not None]
        try:
            self.streams.publish_here(refs)
        except DispatchUnavailable:
            self.failed = refs


def _with_dispatch(request: EnqueueRequest) -> EnqueueRequest:
    return dataclasses.replace(request, dispatch_now=True)


__all__ = ["MAX_BATCH", "Client", "validate_batch", "validate_enqueue", "validate_filter"]
