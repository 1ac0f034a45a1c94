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
import json
import math
import re
from collections.abc import Callable, Mapping, Sequence
from datetime import UTC, datetime
from types import TracebackType
from typing import Any

import anyio

from gochatd.dispatch.redis_streams import RedisStreams
from gochatd.errors import ConfigError, DispatchUnavailable, InvalidJob
from gochatd.group_commit import GroupCommit
from gochatd.logs import get_logger
from gochatd.model import DispatchRef, EnqueueRequest, EnqueueResult, Job, JobFilter
from gochatd.new_job import NewJob, as_new_job
from gochatd.registry import JOB_TYPE_RE, QUEUE_RE, REGISTRY
from gochatd.store import JobStore, open_routed_store

_TRACEPARENT = re.compile(r"^[0-9a-f]{2}-[0-9a-f]{32}-[0-9a-f]{16}-[0-9a-f]{2}$")
DEFAULT_MAX_PAYLOAD_BYTES = 1 << 20
DISPATCH_RETRY_S = 5.0
#: The most items one ``enqueue_many`` call takes (one INSERT); split larger batches.
MAX_BATCH = 10_000
_FIELD_MESSAGE = re.compile(r"^(\w+): ")
#: canonical_json's form, refusing NaN and Infinity (not JSON) in the same pass. Built once:
#: json.dumps with options builds a new encoder on every call.
_STRICT_CANONICAL = json.JSONEncoder(
    sort_keys=True, separators=(",", ":"), ensure_ascii=False, allow_nan=False
)


def validate_enqueue(
    job_type: str,
    payload: Any,
    *,
    queue: str | None,
    tenant_id: str,
    idempotency_key: str | None,
    scheduled_at: datetime | None,
    delay_s: float | None,
    max_attempts: int | None,
    priority: int,
    traceparent: str | None,
    max_payload_bytes: int,
    dispatch_now: bool = False,
) -> EnqueueRequest:
    """Refuse bad input before anything is written. Every message names the field."""
    if not isinstance(job_type, str) or not JOB_TYPE_RE.match(job_type) or len(job_type) > 200:
        raise InvalidJob("job_type: expected letters, digits, '_', '-', '.' and ':' (max 200)")
    # Left out: a handler imported in this process decides, else the store fills in what a
    # daemon published for the type, else "default" and 25 (docs/job-types.md).
    spec = REGISTRY.get(job_type)
    queue = queue or (spec.queue if spec else None)
    if queue is not None and (not isinstance(queue, str) or not QUEUE_RE.match(queue)):
        raise InvalidJob("queue: expected 1-64 letters, digits, '_' or '-'")
    if payload is None:
        payload = {}
    if not isinstance(payload, dict):
        raise InvalidJob("payload: expected a JSON object")
    try:
        encoded = _STRICT_CANONICAL.encode(payload)
        json.loads(encoded)
        size = len(encoded.encode("utf-8"))  # lone surrogates are not text
    except (TypeError, ValueError, RecursionError) as exc:
        raise InvalidJob(f"payload: not JSON-serialisable ({type(exc).__name__})") from None
    if size > max_payload_bytes:
        raise InvalidJob(f"payload: {size} bytes is over the limit of {max_payload_bytes}")
    if "\x00" in encoded or "\\u0000" in encoded:
        raise InvalidJob("payload: NUL characters are not allowed")
    if not isinstance(tenant_id, str) or not 1 <= len(tenant_id) <= 200 or not _is_text(tenant_id):
        raise InvalidJob("tenant_id: expected 1-200 characters of text")
    if idempotency_key is not None and (
        not isinstance(idempotency_key, str) or not 1 <= len(idempotency_key) <= 512
        or not _is_text(idempotency_key)
    ):
        raise InvalidJob("idempotency_key: expected 1-512 characters of text")
    if scheduled_at is not None and delay_s is not None:
        raise InvalidJob("give either scheduled_at or delay_s, not both")
    if scheduled_at is not None and scheduled_at.tzinfo is None:
        raise InvalidJob("scheduled_at: needs a time zone (for example 2026-01-01T00:00:00Z)")
    if scheduled_at is not None:
        try:
            scheduled_at.astimezone(UTC)
        except OverflowError:
            raise InvalidJob("scheduled_at: expected a time between the years 1 and 9999 "
                             "in UTC") from None
    if delay_s is not None and (not math.isfinite(delay_s) or not 0 <= delay_s <= 10 * 365 * 86400):
        raise InvalidJob("delay_s: expected 0 to 10 years in seconds")
    attempts = max_attempts if max_attempts is not None else (spec.max_attempts if spec else None)
    if attempts is not None and (
        isinstance(attempts, bool) or not isinstance(attempts, int) or not 1 <= attempts <= 1000
    ):
        raise InvalidJob("max_attempts: expected an integer in 1..1000")
    if isinstance(priority, bool) or not isinstance(priority, int) or not -1000 <= priority <= 1000:
        raise InvalidJob("priority: expected an integer in -1000..1000")
    if traceparent is not None and not _TRACEPARENT.match(traceparent):
        raise InvalidJob("traceparent: expected a W3C traceparent (00-<32 hex>-<16 hex>-<2 hex>)")
    return EnqueueRequest(
        job_type=job_type,
        payload=payload,
        queue=queue,
        tenant_id=tenant_id,
        idempotency_key=idempotency_key,
        delay_s=delay_s,
        scheduled_at=scheduled_at,
        max_attempts=attempts,
        priority=priority,
        traceparent=traceparent,
        dispatch_now=dispatch_now,
    )


def validate_batch(
    items: Sequence[NewJob | Mapping[str, Any]], max_payload_bytes: int,
    dispatch_now: bool = False,
) -> list[EnqueueRequest]:
    """Validate every item before anything is written; the first bad one is refused with its
    index and field (``requests[3].queue: …``)."""
    if isinstance(items, str | bytes | Mapping) or not isinstance(items, Sequence):
        raise InvalidJob("requests: expected a list of jobs")
    if len(items) > MAX_BATCH:
        raise InvalidJob(f"requests: {len(items)} jobs is over the limit of {MAX_BATCH} per call")
    requests = []
    for index, item in enumerate(items):
        new = as_new_job(item, index)
        try:
            requests.append(validate_enqueue(
                new.job_type, new.payload, queue=new.queue, tenant_id=new.tenant_id,
                idempotency_key=new.idempotency_key, scheduled_at=new.scheduled_at,
                delay_s=new.delay_s, max_attempts=new.max_attempts, priority=new.priority,
                traceparent=new.traceparent, max_payload_bytes=max_payload_bytes,
                dispatch_now=dispatch_now,
            ))
        except InvalidJob as exc:
            message = str(exc)
            if _FIELD_MESSAGE.match(message):
                raise InvalidJob(f"requests[{index}].{message}") from None
            raise InvalidJob(f"requests[{index}]: {message}") from None
    return requests


def validate_filter(flt: JobFilter) -> JobFilter:
    """A listing's filters, by the rules enqueue applies to the same fields: a value no job
    can have is refused rather than matched against nothing."""
    if flt.queue is not None and (not isinstance(flt.queue, str) or not QUEUE_RE.match(flt.queue)):
        raise InvalidJob("queue: expected 1-64 letters, digits, '_' or '-'")
    if flt.tenant_id is not None and (
        not isinstance(flt.tenant_id, str) or not 1 <= len(flt.tenant_id) <= 200
        or not _is_text(flt.tenant_id)
    ):
        raise InvalidJob("tenant_id: expected 1-200 characters of text")
    if flt.job_type is not None and (
        not isinstance(flt.job_type, str) or not JOB_TYPE_RE.match(flt.job_type)
        or len(flt.job_type) > 200
    ):
        raise InvalidJob("job_type: expected letters, digits, '_', '-', '.' and ':' (max 200)")
    return flt


def _is_text(value: str) -> bool:
    """Encodable as UTF-8 (no lone surrogates, which undecodable argv bytes become)."""
    try:
        value.encode("utf-8")
    except UnicodeEncodeError:
        return False
    return True


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
        max_payload_bytes: int = DEFAULT_MAX_PAYLOAD_BYTES,
        stream_prefix: str = "gochat:jobs",
        consumer_group: str = "gochat-workers",
        on_enqueued: Callable[[Job], None] | None = None,
    ) -> None:
        if store is None and database_url is None:
            raise ConfigError("Client needs a database_url or a store")
        self._database_url = database_url
        self._redis_url = redis_url
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
                consumer="client", maxlen=100_000, block_s=1.0,
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
