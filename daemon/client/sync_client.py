"""``gochatd.SyncClient``: the client for synchronous code (Django, Flask, scripts, threads).

The same methods, validation, idempotency and errors as ``gochatd.Client``, without an
event loop: each call runs the store's own unit (store/ops.py) on the calling thread, on a
connection lent from a bounded pool (store/lender.py), then XADDs the new jobs through a
thread-safe Redis client, right after the commit. One client is meant to be shared by every
thread of a process::

    with gochatd.SyncClient("postgresql://…", "redis://…") as client:
        job = client.enqueue("message:send_reply", {"message_id": 7}, queue="high")

A tenant that ``gochatd migrate`` moved to another database is followed as ``Client``
follows it (migrate/routing/sync.py): its calls go to the database that holds it now.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Mapping, Sequence
from datetime import datetime
from types import TracebackType
from typing import Any, TypeVar, cast

from gochatd.client import job_controls, workflows
from gochatd.client.client import ClientCore
from gochatd.client.inline import inline_hook_sync
from gochatd.client.job_controls import CLIENT_ACTOR
from gochatd.client.validation import validate_filter, validate_selection
from gochatd.config.fields import DEFAULTS
from gochatd.errors import JobNotFound, ResourceClosed
from gochatd.migrate.routing.sync import SyncRoutes
from gochatd.migrate.routing.view import group_by, merge_pages
from gochatd.model import (
    AfterCommit,
    BulkResult,
    ClaimedJob,
    EnqueueRequest,
    EnqueueResult,
    Finish,
    Job,
    JobAction,
    JobAttempt,
    JobFilter,
    JobSelection,
    enum_member,
)
from gochatd.new_job import NewJob
from gochatd.obs import otel
from gochatd.results.wait import SyncWaiter, listen_dsn
from gochatd.store import controls, open_store, ops
from gochatd.store.db import Db
from gochatd.store.presence import check_schema, require_database_file
from gochatd.store.sql_store import SqlJobStore
from gochatd.workflows import store as workflow_units
from gochatd.workflows.model import Batch, EnqueuedBatch, JobLinks, Workflow, WorkflowResult

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
        self._routes = SyncRoutes(
            _sql_store(database_url, pool_size),
            lambda url: _sql_store(url, max(2, pool_size // 2)))
        self._waiter = SyncWaiter(listen_dsn(database_url))
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
            home = self._routes.home
            version = home.run_lent(ops.schema_version)
            check_schema(home.dialect, version, self._database_url or "", older_ok=True)
            self._routes.start(version)
            streams = self._new_streams()
            if streams is not None:
                streams.open_here()
                self.streams = streams
                streams.check_url_here()
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
            streams.close_here()
        self._waiter.close()
        self._routes.close()

    def __enter__(self) -> SyncClient:
        return self.open()

    def __exit__(
        self, et: type[BaseException] | None, ev: BaseException | None, tb: TracebackType | None
    ) -> None:
        self.close()

    def _open_routes(self) -> SyncRoutes:
        if self._state != "open":
            raise ResourceClosed(
                "SyncClient is closed" if self._state == "closed"
                else "use 'with SyncClient(...)' (or .open()) before calling it")
        return self._routes

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
        depends_on: Sequence[int] = (),
        run_if_failed: bool = False,
    ) -> Job:
        """Enqueue one job and return its row (``Client.enqueue``): ``InvalidJob`` for bad
        input, ``IdempotencyConflict`` when the key names a different job; ``depends_on``
        and ``run_if_failed`` as there (docs/workflows.md)."""
        inline = inline_hook_sync()
        request = self._request(
            job_type, payload, queue=queue, tenant_id=tenant_id, idempotency_key=idempotency_key,
            scheduled_at=scheduled_at, delay_s=delay_s, max_attempts=max_attempts,
            priority=priority, traceparent=traceparent, unique_for_s=unique_for_s,
            unique_key=unique_key,
        )
        if depends_on:
            flow = workflows.dependent(request, workflows.dependency_ids(depends_on), run_if_failed)
            return self._workflow(flow).results[0].job
        routes = self._open_routes()
        spans = otel.SPANS
        if spans is None:
            result = self._write_one(routes, request)
        else:
            result = spans.enqueue_sync(lambda carried: self._write_one(routes, carried), request)
        if inline is not None:
            inline.run_sync(_InlineStore(routes), [result])
        return result.job

    def enqueue_many(
        self,
        requests: Sequence[NewJob | Mapping[str, Any]],
        *,
        raise_on_conflict: bool = True,
    ) -> list[EnqueueResult]:
        """A batch in one INSERT and one XADD call (``Client.enqueue_many``)."""
        inline = inline_hook_sync()
        batch = self._batch(requests)
        if not batch:
            return []
        routes = self._open_routes()
        spans = otel.SPANS
        if spans is None:
            results = self._write_batch(routes, batch, raise_on_conflict)
        else:
            results = spans.enqueue_many_sync(
                lambda carried: self._write_batch(routes, carried, raise_on_conflict), batch)
        if inline is not None:
            inline.run_sync(_InlineStore(routes), results)
        return results

    def _write_one(self, routes: SyncRoutes, request: EnqueueRequest) -> EnqueueResult:
        publisher = self._publisher()
        result = routes.for_tenant(request.tenant_id, ops.enqueue, request, publisher)
        self._after_commit([result], publisher)
        return result

    def _write_batch(self, routes: SyncRoutes, batch: list[EnqueueRequest],
                     raise_on_conflict: bool) -> list[EnqueueResult]:
        publisher = self._publisher()
        results = _enqueue_many(routes, batch, raise_on_conflict, publisher)
        self._after_commit(results, publisher)
        return results

    def chain(self, jobs: Sequence[NewJob | Mapping[str, Any]]) -> list[Job]:
        """``Client.chain``: each job after the one before it (docs/workflows.md)."""
        return [r.job for r in self._workflow(workflows.chain_of(self._batch(jobs))).results]

    def batch(self, jobs: Sequence[NewJob | Mapping[str, Any]], *,
              on_success: NewJob | Mapping[str, Any] | None = None,
              on_complete: NewJob | Mapping[str, Any] | None = None) -> EnqueuedBatch:
        """``Client.batch``: the jobs and their callbacks (docs/workflows.md)."""
        flow = workflows.batch_of(self._batch(jobs), *self._callbacks(on_success, on_complete))
        return workflows.enqueued_batch(flow, self._workflow(flow))

    def _workflow(self, flow: Workflow) -> WorkflowResult:
        inline = inline_hook_sync()  # gochatd.testing.inline(): run as they are released
        written = workflows.traced_sync(self._write_workflow, flow)
        if inline is not None:
            inline.run_workflow_sync(_InlineStore(self._open_routes()), written.results)
        return written

    def _write_workflow(self, flow: Workflow) -> WorkflowResult:
        publisher = self._publisher()
        written = self._open_routes().for_tenant(
            flow.items[0].request.tenant_id, workflow_units.enqueue_workflow, flow, publisher)
        self._after_commit(workflows.created(written.results), publisher)
        return written

    def job_links(self, job_id: int, with_results: bool = True) -> JobLinks | None:
        return _job_links(self._open_routes(), job_id, with_results)

    def get_batch(self, batch_id: int) -> Batch | None:
        for store in self._open_routes().active():
            batch = store.run_lent(workflow_units.get_batch, batch_id)
            if batch is not None:
                return batch
        return None

    def get_job(self, job_id: int) -> Job | None:
        return _get_job(self._open_routes(), job_id)

    def wait(self, job_id: int, *, timeout_s: float | None = None) -> Job:
        """``Client.wait`` from a thread: the completed job (``.result``); ``JobFailed`` for a
        dead or cancelled one, ``WaitTimeout`` past ``timeout_s``, ``JobNotFound``."""
        return self._waiter.wait(self.get_job, job_id, timeout_s)

    def list_job_attempts(self, job_id: int) -> list[JobAttempt]:
        """From the database that holds the job now (attempts do not move with a tenant)."""
        routes = self._open_routes()
        for store in routes.active():
            if store.run_lent(ops.get_job, job_id) is not None:
                return store.run_lent(ops.list_job_attempts, job_id)
        return []

    def list_jobs(self, flt: JobFilter) -> list[Job]:
        routes, flt = self._open_routes(), validate_filter(flt)
        if flt.tenant_id is not None:
            return routes.store_now(flt.tenant_id).run_lent(ops.list_jobs, flt)
        return merge_pages(routes.each(ops.list_jobs, flt), flt)

    def retry(self, job_id: int, *, actor: str = CLIENT_ACTOR) -> Job:
        return self._control(JobAction.RETRY, job_id, actor, ops.requeue_job)

    def cancel(self, job_id: int, *, actor: str = CLIENT_ACTOR) -> Job:
        return self._control(JobAction.CANCEL, job_id, actor, ops.cancel_job)

    def delete(self, job_id: int, *, actor: str = CLIENT_ACTOR) -> Job:
        return self._control(JobAction.DELETE, job_id, actor, controls.delete_job)

    def discard(self, job_id: int, *, actor: str = CLIENT_ACTOR) -> Job:
        return self._control(JobAction.DISCARD, job_id, actor, controls.discard_job)

    def run_now(self, job_id: int, *, actor: str = CLIENT_ACTOR) -> Job:
        routes = self._open_routes()

        def run() -> tuple[Job, bool]:
            return routes.for_tenant(_holder(routes, job_id).tenant_id, controls.run_job_now,
                                     job_id)

        return job_controls.one_sync(JobAction.RUN_NOW, job_id, actor, run)

    def _control(self, action: JobAction, job_id: int, actor: str,
                 unit: Callable[[Db, int], Job]) -> Job:
        """One job's control where its tenant lives (``RoutedStore``'s rule), audited."""
        routes = self._open_routes()

        def run() -> tuple[Job, bool]:
            return routes.for_tenant(_holder(routes, job_id).tenant_id, unit, job_id), True

        return job_controls.one_sync(action, job_id, actor, run)

    def bulk(self, action: JobAction | str, selection: JobSelection, *,
             actor: str = CLIENT_ACTOR) -> BulkResult:
        routes = self._open_routes()
        kind = enum_member(JobAction, action, "action")
        validate_selection(selection)
        parts = []
        for store in routes.active():
            walk = controls.BulkWalk(kind, selection)
            while (step := walk.next_step()) is not None:
                walk.take(store.run_lent(step))
            parts.append(walk.result())
        result = BulkResult(kind, sum(p.matched for p in parts), sum(p.changed for p in parts))
        return job_controls.audit_bulk(kind, selection, actor, result)


def _sql_store(url: str, pool_size: int) -> SqlJobStore:
    return cast("SqlJobStore", open_store(url, pool_size=pool_size))


def _enqueue_many(routes: SyncRoutes, batch: list[EnqueueRequest], raise_on_conflict: bool,
                  publisher: AfterCommit | None) -> list[EnqueueResult]:
    """One batch where its tenant lives; several tenants: each tenant's items in one batch
    (all-or-nothing per database, as ``RoutedStore.enqueue_many``), results in order."""
    groups = group_by(range(len(batch)), lambda i: batch[i].tenant_id)
    if not routes.routes.routes or len(groups) == 1:
        return routes.for_tenant(batch[0].tenant_id if len(groups) == 1 else None,
                                 ops.enqueue_many, batch, raise_on_conflict, publisher)
    results: list[EnqueueResult | None] = [None] * len(batch)
    for tenant, indexes in groups.items():
        done = routes.for_tenant(tenant, ops.enqueue_many, [batch[i] for i in indexes],
                                 raise_on_conflict, publisher)
        for i, result in zip(indexes, done, strict=True):
            results[i] = result
    return [r for r in results if r is not None]


def _get_job(routes: SyncRoutes, job_id: int) -> Job | None:
    for store in routes.active():
        job = store.run_lent(ops.get_job, job_id)
        if job is not None:
            return job
    return None


def _job_links(routes: SyncRoutes, job_id: int, with_results: bool) -> JobLinks | None:
    for store in routes.active():
        links = store.run_lent(workflow_units.job_links, job_id, with_results)
        if links is not None:
            return links
    return None


def _holder(routes: SyncRoutes, job_id: int) -> Job:
    """The job as the database that holds it now has it (JobNotFound if none does)."""
    job = _get_job(routes, job_id)
    if job is None:
        raise JobNotFound(job_id)
    return job


class _InlineStore:
    """``gochatd.testing.inline()``'s view of the store: the same units, where the job is."""

    def __init__(self, routes: SyncRoutes) -> None:
        self._routes = routes

    def claim_jobs(self, job: Job, owner: str, lease_s: float) -> list[ClaimedJob]:
        return self._routes.for_tenant(job.tenant_id, ops.claim_jobs, [job.id], owner, lease_s)

    def finish_jobs(self, job: Job, finish: Finish) -> set[int]:
        return self._routes.for_tenant(job.tenant_id, ops.finish_jobs, [finish], None)

    def get_job(self, job_id: int) -> Job | None:
        return _get_job(self._routes, job_id)

    def job_links(self, job_id: int) -> JobLinks | None:
        return _job_links(self._routes, job_id, True)


__all__ = ["SyncClient"]
