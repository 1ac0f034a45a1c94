"""The public client: enqueue (one job or a batch), inspect and control jobs.

Enqueueing is validation, the idempotent insert, then an XADD once the row commits. A failed
XADD never fails an enqueue: the row is the truth, and the scheduler's sweep re-dispatches
it. Usable from Trio and asyncio code (``SyncClient``, in sync_client.py, from threads)::

    async with gochatd.Client("postgresql://…", "redis://…") as client:
        job = await client.enqueue("message:send_reply", {"message_id": 7}, queue="high")
        results = await client.enqueue_many(
            [gochatd.NewJob("message:send_reply", {"message_id": n}) for n in range(1000)]
        )
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Mapping, Sequence
from datetime import datetime
from types import TracebackType
from typing import Any

import anyio

from gochatd.client import job_controls, workflows
from gochatd.client.group_commit import GroupCommit
from gochatd.client.inline import inline_hook
from gochatd.client.job_controls import CLIENT_ACTOR
from gochatd.client.publisher import Publisher, with_dispatch
from gochatd.client.validation import MAX_BATCH, validate_batch, validate_enqueue, validate_filter
from gochatd.config.fields import DEFAULTS
from gochatd.dispatch.redis_streams import RedisStreams
from gochatd.errors import ConfigError
from gochatd.model import (
    BulkResult,
    EnqueueRequest,
    EnqueueResult,
    Job,
    JobAction,
    JobAttempt,
    JobFilter,
    JobSelection,
    enum_member,
)
from gochatd.new_job import NewJob
from gochatd.obs import otel
from gochatd.obs.logs import get_logger
from gochatd.results.wait import AsyncWaiter, listen_dsn
from gochatd.store import JobStore, open_routed_store
from gochatd.store.presence import require_database_file, require_schema
from gochatd.workflows.model import Batch, EnqueuedBatch, JobLinks, Workflow, WorkflowResult

DISPATCH_RETRY_S = 5.0


class ClientCore:
    """What ``Client`` and ``SyncClient`` share: the settings, enqueue validation, and the
    XADD after commit (with its back-off after a failure). No I/O of its own."""

    def __init__(
        self,
        database_url: str | None,
        redis_url: str | None,
        *,
        max_payload_bytes: int = DEFAULTS["worker_max_payload_bytes"],
        stream_prefix: str = DEFAULTS["worker_redis_stream_prefix"],
        consumer_group: str = DEFAULTS["worker_redis_consumer_group"],
        redis_cluster: bool = DEFAULTS["redis_cluster"],
        on_enqueued: Callable[[Job], None] | None = None,
    ) -> None:
        self._database_url = database_url
        self._redis_url = redis_url
        self._redis_cluster = redis_cluster
        self._stream_prefix = stream_prefix
        self._consumer_group = consumer_group
        self.streams: RedisStreams | None = None
        self.max_payload_bytes = max_payload_bytes
        self.on_enqueued = on_enqueued
        #: False after an XADD failed (or Redis did not answer at open); enqueues then rely
        #: on the database wake-up instead, and XADD is tried again after DISPATCH_RETRY_S.
        self.dispatch_ok = True
        self._dispatch_retry_at = 0.0
        self._log = get_logger(component="client")

    def _now(self) -> float:
        return anyio.current_time()

    def _new_streams(self) -> RedisStreams | None:
        return RedisStreams(
            self._redis_url, prefix=self._stream_prefix, group=self._consumer_group,
            consumer="client", maxlen=DEFAULTS["worker_redis_stream_maxlen"], block_s=1.0,
            cluster=self._redis_cluster) if self._redis_url else None

    def _request(self, job_type: str, payload: dict[str, Any] | None, **fields: Any
                 ) -> EnqueueRequest:
        """One job validated (``InvalidJob``: nothing is written), marked for the XADD."""
        request = validate_enqueue(job_type, payload, max_payload_bytes=self.max_payload_bytes,
                                   **fields)
        return with_dispatch(request) if self._will_xadd() else request

    def _batch(self, requests: Sequence[NewJob | Mapping[str, Any]]) -> list[EnqueueRequest]:
        return validate_batch(requests, self.max_payload_bytes, dispatch_now=self._will_xadd())

    def _callbacks(self, *callbacks: NewJob | Mapping[str, Any] | None
                   ) -> list[EnqueueRequest | None]:
        return [None if c is None else self._batch([c])[0] for c in callbacks]

    def _will_xadd(self) -> bool:
        if not self.dispatch_ok and self._now() >= self._dispatch_retry_at:
            self.dispatch_ok = True
        return self.streams is not None and self.dispatch_ok

    def _dispatch_down(self) -> None:
        self.dispatch_ok, self._dispatch_retry_at = False, self._now() + DISPATCH_RETRY_S

    def _publisher(self) -> Publisher | None:
        return Publisher(self.streams) if self.streams is not None else None

    def _after_commit(self, results: Sequence[EnqueueResult], publisher: Publisher | None) -> None:
        """After the write (and its XADD, done on the store's thread): note a failed XADD,
        then tell the owner (wake-ups)."""
        if publisher is not None and publisher.failed:
            refs = publisher.failed
            self._dispatch_down()
            self._log.warning("xadd_failed", job_id=refs[0].job_id, jobs=len(refs),
                              queue=refs[0].queue, error=publisher.error,
                              note="the sweep will re-dispatch it")
        if self.on_enqueued is not None:
            for result in results:
                if result.created:
                    self.on_enqueued(result.job)


class Client(ClientCore):
    """Enqueue, inspect and cancel jobs from Trio or asyncio code.

    ``Client(database_url, redis_url=None)`` opens its own connections in ``async with`` and
    closes them on exit. With a ``redis_url`` every new job that is due is XADDed to its
    queue's stream after commit, so an idle worker starts it within milliseconds; without
    one, workers are woken by the database (LISTEN/NOTIFY or SQLite's data_version). Pass
    ``store=`` (and ``streams=``) instead of URLs to share connections that are already
    open. Synchronous code uses ``gochatd.SyncClient``.
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
        database_prepare: str = "auto",
    ) -> None:
        if store is None and database_url is None:
            raise ConfigError("Client needs a database_url or a store")
        super().__init__(database_url, redis_url, max_payload_bytes=max_payload_bytes,
                         stream_prefix=stream_prefix, consumer_group=consumer_group,
                         redis_cluster=redis_cluster, on_enqueued=on_enqueued)
        self._prepare = database_prepare
        self.store: JobStore | None = store
        self.streams = streams
        self._owned = contextlib.AsyncExitStack()
        self._group = GroupCommit(self._write_group)
        self._waiter = AsyncWaiter(listen_dsn(database_url))

    async def __aenter__(self) -> Client:
        try:
            await self._open_owned()
        except BaseException:
            with anyio.CancelScope(shield=True):  # what opened is closed again
                await self._owned.aclose()
            raise
        return self

    async def _open_owned(self) -> None:
        self._owned.callback(self._waiter.close)
        if self.store is None:
            assert self._database_url is not None
            require_database_file(self._database_url)  # opening would create an empty file
            store = open_routed_store(self._database_url, prepare=self._prepare)
            await store.open()
            self._owned.push_async_callback(store.close)
            # No schema: NoDatabase now, in the words of SyncClient and the command line.
            await require_schema(store, self._database_url, older_ok=True)
            self.store = store
        if self.streams is None and (streams := self._new_streams()) is not None:
            await streams.open()
            self._owned.push_async_callback(streams.close)
            self.streams = streams
            if not await streams.check_url():  # a wrong URL is refused before any write
                self._dispatch_down()  # not tried for DISPATCH_RETRY_S: the sweep dispatches
                self._log.warning("redis_unavailable", note="the sweep will dispatch the jobs")

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
        unique_for_s: float | None = None,
        unique_key: str | None = None,
        depends_on: Sequence[int] = (),
        run_if_failed: bool = False,
    ) -> Job:
        """Enqueue one job and return its row. Raises ``InvalidJob`` for bad input (nothing
        is written) and ``IdempotencyConflict`` when (tenant_id, idempotency_key) already
        names a different job; the same job again returns the existing row.

        ``unique_key`` / ``unique_for_s``: while a job of the same key (default: the type
        and payload) is queued, retrying or running, or completed less than
        ``unique_for_s`` seconds after its enqueue, return that job instead of adding one
        (docs/unique-jobs.md).

        ``queue`` and ``max_attempts`` left out: the handler's, when this process imported
        it; else the values a daemon published for the type when it started; else
        ``"default"`` and 25 (docs/job-types.md).

        ``depends_on``: job ids this one waits for; it starts once all completed, and is
        cancelled if one ends dead or cancelled, unless ``run_if_failed`` (docs/workflows.md)."""
        inline = inline_hook()
        request = self._request(
            job_type, payload, queue=queue, tenant_id=tenant_id, idempotency_key=idempotency_key,
            scheduled_at=scheduled_at, delay_s=delay_s, max_attempts=max_attempts,
            priority=priority, traceparent=traceparent, unique_for_s=unique_for_s,
            unique_key=unique_key,
        )
        if depends_on:
            flow = workflows.dependent(request, workflows.dependency_ids(depends_on), run_if_failed)
            return (await self._workflow(flow)).results[0].job
        # Concurrent callers share one INSERT and one XADD pipeline (group commit).
        spans = otel.SPANS
        if spans is None:
            result = await self._group.submit(request)
        else:
            result = await spans.enqueue_async(self._group.submit, request)
        if inline is not None:
            await inline(self._store(), [result])
        return result.job

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
        inline = inline_hook()
        batch = self._batch(requests)
        if not batch:
            return []
        spans = otel.SPANS
        if spans is None:
            results = await self._write_batch(batch, raise_on_conflict)
        else:
            results = await spans.enqueue_many_async(
                lambda carried: self._write_batch(carried, raise_on_conflict), batch)
        if inline is not None:
            await inline(self._store(), results)
        return results

    async def _write_batch(self, batch: list[EnqueueRequest], raise_on_conflict: bool
                           ) -> list[EnqueueResult]:
        publisher = self._publisher()
        results = await self._store().enqueue_many(
            batch, raise_on_conflict=raise_on_conflict, after_commit=publisher)
        self._after_commit(results, publisher)
        return results

    async def chain(self, jobs: Sequence[NewJob | Mapping[str, Any]]) -> list[Job]:
        """Jobs that run one after another (docs/workflows.md): each starts once the one
        before it completed and reads its result (``ctx.dependencies()``); a link that ends
        dead or cancelled cancels the rest. One transaction; the rows in order."""
        written = await self._workflow(workflows.chain_of(self._batch(jobs)))
        return [r.job for r in written.results]

    async def batch(self, jobs: Sequence[NewJob | Mapping[str, Any]], *,
                    on_success: NewJob | Mapping[str, Any] | None = None,
                    on_complete: NewJob | Mapping[str, Any] | None = None) -> EnqueuedBatch:
        """A batch (docs/workflows.md): its jobs, and callbacks enqueued once by the finish of
        its last job: ``on_success`` if every job completed, ``on_complete`` however they
        ended. Each callback sees the jobs' ids, outcomes and results (``ctx.dependencies()``)."""
        flow = workflows.batch_of(self._batch(jobs), *self._callbacks(on_success, on_complete))
        return workflows.enqueued_batch(flow, await self._workflow(flow))

    async def _workflow(self, flow: Workflow) -> WorkflowResult:
        inline = inline_hook()  # gochatd.testing.inline(): its jobs run as they are released
        written = await workflows.traced_async(self._write_workflow, flow)
        if inline is not None:
            await inline.run_workflow(self._store(), written.results)
        return written

    async def _write_workflow(self, flow: Workflow) -> WorkflowResult:
        publisher = self._publisher()
        written = await self._store().enqueue_workflow(flow, after_commit=publisher)
        self._after_commit(workflows.created(written.results), publisher)
        return written

    async def job_links(self, job_id: int, with_results: bool = True) -> JobLinks | None:
        """The job's dependencies, how many it still waits on, its batch (None: no such job)."""
        return await self._store().job_links(job_id, with_results)

    async def get_batch(self, batch_id: int) -> Batch | None:
        """A batch's members by status, its size and its callbacks (None: no such batch)."""
        return await self._store().get_batch(batch_id)

    async def get_job(self, job_id: int) -> Job | None:
        """The job's current row, or None if there is no such job (or it was pruned)."""
        return await self._store().get_job(job_id)

    async def wait(self, job_id: int, *, timeout_s: float | None = None) -> Job:
        """Wait until the job finishes and return it: completed, with ``.result`` (what its
        handler returned). Raises ``JobFailed`` (``.job``) for a dead or cancelled job,
        ``WaitTimeout`` past ``timeout_s`` (None: no limit), ``JobNotFound``. Woken by the
        database, not a poll loop (docs/results.md)."""
        return await self._waiter.wait(self._store().get_job, job_id, timeout_s)

    async def list_job_attempts(self, job_id: int) -> list[JobAttempt]:
        """The job's recorded runs, newest first; empty if never run or unknown."""
        return await self._store().list_job_attempts(job_id)

    async def list_jobs(self, flt: JobFilter) -> list[Job]:
        """Jobs matching the filter, by id (page with ``JobFilter.after_id``). Raises
        ``InvalidJob`` for a filter value no job can have (``validate_filter``)."""
        return await self._store().list_jobs(validate_filter(flt))

    async def retry(self, job_id: int, *, actor: str = CLIENT_ACTOR) -> Job:
        """Retry (requeue) a dead or cancelled job: back to queued, attempts reset
        (``InvalidTransition`` otherwise). The store calls it ``requeue_job``. Each control
        here logs one ``job_control`` line naming ``actor`` (docs/operations.md)."""
        return await job_controls.retry(self._store(), job_id, actor=actor)

    async def cancel(self, job_id: int, *, actor: str = CLIENT_ACTOR) -> Job:
        """Cancel a job: a waiting one at once; a running one's worker cancels its handler at
        the next heartbeat. ``JobNotFound``, or ``InvalidTransition`` for a finished job."""
        return await job_controls.cancel(self._store(), job_id, actor=actor)

    async def delete(self, job_id: int, *, actor: str = CLIENT_ACTOR) -> Job:
        """Delete a job in any status but running (cancel a running one first); returns the
        row as it was. Raises ``JobNotFound``, or ``InvalidTransition`` for a running job."""
        return await job_controls.delete(self._store(), job_id, actor=actor)

    async def run_now(self, job_id: int, *, actor: str = CLIENT_ACTOR) -> Job:
        """Make a waiting job due now (one already due is returned unchanged). Raises
        ``JobNotFound``, or ``InvalidTransition`` for a job in any other status."""
        return await job_controls.run_now(self._store(), job_id, actor=actor)

    async def discard(self, job_id: int, *, actor: str = CLIENT_ACTOR) -> Job:
        """Make a queued or retrying job dead without running it (``error_class``
        ``discarded``). Raises ``JobNotFound``, or ``InvalidTransition`` otherwise."""
        return await job_controls.discard(self._store(), job_id, actor=actor)

    async def bulk(self, action: JobAction | str, selection: JobSelection, *,
                   actor: str = CLIENT_ACTOR) -> BulkResult:
        """One control (``retry``, ``cancel``, ``delete``, ``discard``, ``run_now``) over the
        jobs of ``selection`` (ids and/or filters; at least one), in bounded batches."""
        kind = enum_member(JobAction, action, "action")
        return await job_controls.bulk(self._store(), kind, selection, actor=actor)


__all__ = ["MAX_BATCH", "Client", "ClientCore", "validate_batch", "validate_enqueue", "validate_filter"]
