"""``gochatd.SyncClient``: the client for synchronous code (Django, Flask, scripts, threads).

The same methods, validation, idempotency and errors as ``gochatd.Client``, without an
event loop: each call runs the store's own operation on the calling thread
(``handoff_here.run_here``) on a connection lent from a bounded pool, then XADDs the new
jobs through a thread-safe Redis client, right after the commit. One client is meant to be
shared by every thread of a process::

    with gochatd.SyncClient("postgresql://…", "redis://…") as client:
        job = client.enqueue("message:send_reply", {"message_id": 7}, queue="high")

A tenant that ``gochatd migrate`` moved to another database is not followed (the async
``Client`` does that): its writes raise ``TenantMoved`` from the home database.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Coroutine, Mapping, Sequence
from datetime import datetime
from types import TracebackType
from typing import Any, TypeVar

from gochatd import job_controls
from gochatd.client import INLINE, ClientCore, InlineHook
from gochatd.config_fields import DEFAULTS
from gochatd.errors import ResourceClosed
from gochatd.handoff_here import run_here
from gochatd.job_controls import CLIENT_ACTOR
from gochatd.model import (
    BulkResult,
    EnqueueResult,
    Job,
    JobAction,
    JobAttempt,
    JobFilter,
    JobSelection,
    enum_member,
)
from gochatd.new_job import NewJob
from gochatd.store import JobStore, open_store
from gochatd.store.presence import require_database_file, require_schema
from gochatd.validation import validate_filter

T = TypeVar("T")
DEFAULT_POOL_SIZE = 8


class SyncClient(ClientCore):
    """Enqueue, inspect and cancel jobs from synchronous code; thread-safe.

    ``SyncClient(database_url, redis_url=None, pool_size=8)``: at most ``pool_size``
    database connections, opened as threads need them (a thread finding them all busy waits
    for one). ``with`` checks the database now and closes every connection on exit; after
    ``close()`` every call raises ``ResourceClosed``.
    """

    def __init__(
        self,
        database_url: str,
        redis_url: str | None = None,
        *,
        pool_size: int = DEFAULT_POOL_SIZE,
        max_payload_bytes: int = DEFAULTS["worker_max_payload_bytes"],
        stream_prefix: str = DEFAULTS["worker_redis_stream_prefix"],
        consumer_group: str = DEFAULTS["worker_redis_consumer_group"],
        redis_cluster: bool = DEFAULTS["redis_cluster"],
    ) -> None:
        super().__init__(database_url, redis_url, max_payload_bytes=max_payload_bytes,
                         stream_prefix=stream_prefix, consumer_group=consumer_group,
                         redis_cluster=redis_cluster)
        self._store: JobStore = open_store(database_url, pool_size=pool_size)
        self._lock = threading.Lock()
        self._state = "new"  # new -> open -> closed

    def _now(self) -> float:
        return time.monotonic()

    # -- lifecycle -------------------------------------------------------------------------

    def open(self) -> SyncClient:
        """Connect now (a database that is not there fails here, ``StoreUnavailable``) and
        check the Redis URL. ``with SyncClient(...)`` calls it."""
        with self._lock:
            if self._state == "closed":
                raise ResourceClosed("SyncClient is closed")
            if self._state == "open":
                return self
            self._state = "open"
        try:
            require_database_file(self._database_url or "")  # opening would create a file
            # No schema: NoDatabase now, in the words of Client and the command line.
            run_here(require_schema(self._store, self._database_url or "", older_ok=True))
            streams = self._new_streams()
            if streams is not None:
                run_here(streams.open())
                self.streams = streams
                run_here(streams.check_url())
        except BaseException:
            self.close()
            raise
        return self

    def close(self) -> None:
        """Close every connection (those in use close when their call returns)."""
        with self._lock:
            if self._state == "closed":
                return
            self._state = "closed"
        streams, self.streams = self.streams, None
        if streams is not None:
            run_here(streams.close())
        run_here(self._store.close())

    def __enter__(self) -> SyncClient:
        return self.open()

    def __exit__(
        self, et: type[BaseException] | None, ev: BaseException | None, tb: TracebackType | None
    ) -> None:
        self.close()

    def _run(self, operation: Coroutine[Any, Any, T]) -> T:
        if self._state != "open":
            operation.close()
            raise ResourceClosed(
                "SyncClient is closed" if self._state == "closed"
                else "use 'with SyncClient(...)' (or .open()) before calling it")
        return run_here(operation)

    # -- the operations (each is Client's, see there) -----------------------------------

    def enqueue(
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
        """Enqueue one job and return its row (``Client.enqueue``): ``InvalidJob`` for bad
        input, ``IdempotencyConflict`` when the key names a different job."""
        inline = _inline_hook()
        request = self._request(
            job_type, payload, queue=queue, tenant_id=tenant_id, idempotency_key=idempotency_key,
            scheduled_at=scheduled_at, delay_s=delay_s, max_attempts=max_attempts,
            priority=priority, traceparent=traceparent, unique_for_s=unique_for_s,
            unique_key=unique_key,
        )
        publisher = self._publisher()
        result = self._run(self._store.enqueue(request, after_commit=publisher))
        self._after_commit([result], publisher)
        if inline is not None:
            inline.run_sync(self._store, [result], self._run)
        return result.job

    def enqueue_many(
        self,
        requests: Sequence[NewJob | Mapping[str, Any]],
        *,
        raise_on_conflict: bool = True,
    ) -> list[EnqueueResult]:
        """A batch in one INSERT and one XADD call (``Client.enqueue_many``)."""
        inline = _inline_hook()
        batch = self._batch(requests)
        if not batch:
            return []
        publisher = self._publisher()
        results = self._run(self._store.enqueue_many(
            batch, raise_on_conflict=raise_on_conflict, after_commit=publisher))
        self._after_commit(results, publisher)
        if inline is not None:
            inline.run_sync(self._store, results, self._run)
        return results

    def get_job(self, job_id: int) -> Job | None:
        return self._run(self._store.get_job(job_id))

    def list_job_attempts(self, job_id: int) -> list[JobAttempt]:
        return self._run(self._store.list_job_attempts(job_id))

    def list_jobs(self, flt: JobFilter) -> list[Job]:
        return self._run(self._store.list_jobs(validate_filter(flt)))

    def retry(self, job_id: int, *, actor: str = CLIENT_ACTOR) -> Job:
        return self._run(job_controls.retry(self._store, job_id, actor=actor))

    def cancel(self, job_id: int, *, actor: str = CLIENT_ACTOR) -> Job:
        return self._run(job_controls.cancel(self._store, job_id, actor=actor))

    def delete(self, job_id: int, *, actor: str = CLIENT_ACTOR) -> Job:
        return self._run(job_controls.delete(self._store, job_id, actor=actor))

    def run_now(self, job_id: int, *, actor: str = CLIENT_ACTOR) -> Job:
        return self._run(job_controls.run_now(self._store, job_id, actor=actor))

    def discard(self, job_id: int, *, actor: str = CLIENT_ACTOR) -> Job:
        return self._run(job_controls.discard(self._store, job_id, actor=actor))

    def bulk(self, action: JobAction | str, selection: JobSelection, *,
             actor: str = CLIENT_ACTOR) -> BulkResult:
        return self._run(job_controls.bulk(self._store, enum_member(JobAction, action, "action"), selection,
                                           actor=actor))


def _inline_hook() -> InlineHook | None:
    """Tests only (``gochatd.testing.inline``): the run that takes this thread's new jobs,
    checked before anything is written."""
    hook = INLINE.get()
    if hook is not None:
        hook.check_sync()
    return hook


__all__ = ["SyncClient"]
