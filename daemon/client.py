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
import dataclasses
from collections.abc import Awaitable, Callable, Coroutine, Mapping, Sequence
from contextvars import ContextVar
from datetime import datetime
from types import TracebackType
from typing import Any, Protocol

import anyio

from gochatd import job_controls
from gochatd.config_fields import DEFAULTS
from gochatd.dispatch.redis_streams import RedisStreams
from gochatd.errors import ConfigError
from gochatd.group_commit import GroupCommit
from gochatd.job_controls import CLIENT_ACTOR
from gochatd.logs import get_logger
from gochatd.model import (
    BulkResult,
    DispatchRef,
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
from gochatd.redact import redact_error
from gochatd.store import JobStore, open_routed_store
from gochatd.store.presence import require_database_file, require_schema
from gochatd.validation import MAX_BATCH, validate_batch, validate_enqueue, validate_filter

DISPATCH_RETRY_S = 5.0


class InlineHook(Protocol):
    """``gochatd.testing.inline()``'s run: checked before a write, called after it."""

    def check(self) -> None: ...
    def __call__(self, store: JobStore, results: Sequence[EnqueueResult]) -> Awaitable[None]: ...
    def check_sync(self) -> None: ...
    def run_sync(self, store: JobStore, results: Sequence[EnqueueResult],
                 run: Callable[[Coroutine[Any, Any, Any]], Any]) -> None: ...


#: Set by ``gochatd.testing.inline()``: new jobs then run at once, after their rows commit.
INLINE: ContextVar[InlineHook | None] = ContextVar("gochatd_inline", default=None)


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
        #: False after an XADD failed; enqueues then rely on the database wake-up instead,
        #: and XADD is tried again after DISPATCH_RETRY_S.
        self.dispatch_ok = True
        self._dispatch_retry_at = 0.0
        self._log = get_logger(component="client")

    def _now(self) -> float:
        return anyio.current_time()

    def _new_streams(self) -> RedisStreams | None:
        if not self._redis_url:
            return None
        return RedisStreams(
            self._redis_url, prefix=self._stream_prefix, group=self._consumer_group,
            consumer="client", maxlen=DEFAULTS["worker_redis_stream_maxlen"], block_s=1.0,
            cluster=self._redis_cluster,
        )

    def _request(self, job_type: str, payload: dict[str, Any] | None, **fields: Any
                 ) -> EnqueueRequest:
        """One job validated (``InvalidJob``: nothing is written), marked for the XADD."""
        request = validate_enqueue(job_type, payload, max_payload_bytes=self.max_payload_bytes,
                                   **fields)
        return _with_dispatch(request) if self._will_xadd() else request

    def _batch(self, requests: Sequence[NewJob | Mapping[str, Any]]) -> list[EnqueueRequest]:
        return validate_batch(requests, self.max_payload_bytes, dispatch_now=self._will_xadd())

    def _will_xadd(self) -> bool:
        if not self.dispatch_ok and self._now() >= self._dispatch_retry_at:
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
            self._dispatch_retry_at = self._now() + DISPATCH_RETRY_S
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

    async def __aenter__(self) -> Client:
        try:
            await self._open_owned()
        except BaseException:
            with anyio.CancelScope(shield=True):  # what opened is closed again
                await self._owned.aclose()
            raise
        return self

    async def _open_owned(self) -> None:
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
            await streams.check_url()  # a wrong URL is refused before anything is written

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
        ``"default"`` and 25 (docs/job-types.md)."""
        inline = _inline_hook()
        request = self._request(
            job_type, payload, queue=queue, tenant_id=tenant_id, idempotency_key=idempotency_key,
            scheduled_at=scheduled_at, delay_s=delay_s, max_attempts=max_attempts,
            priority=priority, traceparent=traceparent, unique_for_s=unique_for_s,
            unique_key=unique_key,
        )
        # Concurrent callers share one INSERT and one XADD pipeline (group commit).
        result = await self._group.submit(request)
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
        inline = _inline_hook()
        batch = self._batch(requests)
        if not batch:
            return []
        publisher = self._publisher()
        results = await self._store().enqueue_many(
            batch, raise_on_conflict=raise_on_conflict, after_commit=publisher)
        self._after_commit(results, publisher)
        if inline is not None:
            await inline(self._store(), results)
        return results

    async def get_job(self, job_id: int) -> Job | None:
        """The job's current row, or None if there is no such job (or it was pruned)."""
        return await self._store().get_job(job_id)

    async def list_job_attempts(self, job_id: int) -> list[JobAttempt]:
        """The job's recorded runs, newest first (docs/operations.md); empty for a job never
        run, or unknown."""
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
        """Cancel a job: a queued or retrying job becomes ``cancelled`` at once; a running one
        gets ``cancel_requested`` and its worker cancels the handler at the next heartbeat.
        Raises ``JobNotFound``, or ``InvalidTransition`` for a finished job."""
        return await job_controls.cancel(self._store(), job_id, actor=actor)

    async def delete(self, job_id: int, *, actor: str = CLIENT_ACTOR) -> Job:
        """Delete a job in any status but running (cancel a running one first); returns the
        row as it was. Raises ``JobNotFound``, or ``InvalidTransition`` for a running job."""
        return await job_controls.delete(self._store(), job_id, actor=actor)

    async def run_now(self, job_id: int, *, actor: str = CLIENT_ACTOR) -> Job:
        """Make a queued or retrying job that is not yet due due now; it is then dispatched
        like any due job (a job due already is returned unchanged). Raises ``JobNotFound``,
        or ``InvalidTransition`` for a job in any other status."""
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


class _Publisher:
    """The store's ``after_commit`` for one write: XADDs the new, due rows on the store's
    connection thread, right after the commit (one thread hop for both). A failed XADD never
    fails the enqueue: the row is the truth, and the sweep re-dispatches it."""

    def __init__(self, streams: RedisStreams) -> None:
        self.streams = streams
        self.failed: list[DispatchRef] = []
        #: What went wrong, redacted (an outage, or any other Redis error: none may fail an
        #: enqueue whose rows committed).
        self.error = ""

    def __call__(self, results: Sequence[EnqueueResult]) -> None:
        refs = [DispatchRef(r.job.id, r.job.job_type, r.job.queue, r.job.tenant_id)
                for r in results if r.created and r.job.dispatched_at is not None]
        try:
            self.streams.publish_here(refs)
        except Exception as exc:  # after the commit: logged by _after_commit, never raised
            self.failed = refs
            self.error = redact_error(f"{type(exc).__name__}: {exc}", limit=200)


def _inline_hook() -> InlineHook | None:
    """Tests only (``gochatd.testing.inline``): the run that takes this task's new jobs,
    checked before anything is written."""
    hook = INLINE.get()
    if hook is not None:
        hook.check()
    return hook


def _with_dispatch(request: EnqueueRequest) -> EnqueueRequest:
    return dataclasses.replace(request, dispatch_now=True)


__all__ = ["MAX_BATCH", "Client", "ClientCore", "validate_batch", "validate_enqueue", "validate_filter"]
