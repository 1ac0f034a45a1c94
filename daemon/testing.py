"""Test helpers for handler authors: run a handler without a daemon, or run jobs inline.

``await run_job("type", payload)`` runs the registered handler against a real ``JobContext``
through the daemon's own runner (``runner.execute``), so a timeout, a retry, a dead job and a
``NonRetryable`` are told apart exactly as a worker tells them apart; no database is needed
(the job is built in memory and nothing is written).

``with inline() as run:`` makes every ``Client.enqueue``/``enqueue_many`` in the block run
its new jobs at once, in the caller's task, right after their rows commit: each job is
claimed, run and finished through the real store (fenced, replies to the outbox), and its
outcome is appended to ``run.outcomes``. See docs/testing.md.
"""

from __future__ import annotations

import contextlib
import dataclasses
import json
from collections.abc import AsyncIterator, Awaitable, Callable, Iterator, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any

import sniffio
import trio

from gochatd.client.inline import INLINE, SyncInlineStore
from gochatd.client.validation import validate_enqueue
from gochatd.config.fields import DEFAULTS
from gochatd.model import ClaimedJob, EnqueueResult, Finish, Job, JobStatus, Outcome, Reply
from gochatd.retry import Backoff
from gochatd.store import open_store
from gochatd.store.base import JobStore
from gochatd.worker.registry import REGISTRY, HandlerSpec, Registry
from gochatd.worker.runner import ActiveJob, RunPolicy, execute
from gochatd.worker.runtimes import loop_for
from gochatd.workflows.model import JobLinks

#: The lease owner of jobs these helpers run (it shows in ``locked_by``).
OWNER = "gochatd.testing"
#: Inline runs take no heartbeat: their lease only has to outlast the handler.
INLINE_LEASE_S = 3600.0


@dataclass(frozen=True, slots=True)
class JobOutcome:
    """How one run of a handler ended, as the daemon would have written it."""

    job_type: str
    #: ``completed``, ``retry``, ``dead`` (or ``cancelled``/``interrupted``, which only a
    #: daemon's heartbeat or shutdown produce).
    status: Outcome
    #: The attempt this run was (the job's ``attempts`` after its claim).
    attempts: int
    error_class: str | None = None
    #: The error as the daemon stores it in ``last_error`` (redacted).
    error: str | None = None
    #: The exception the handler raised, as raised, or a hook's ``HookFailed`` (None for a
    #: timeout or a success).
    exception: Exception | None = None
    #: Replies buffered by ``ctx.reply``; written only with a completion.
    replies: tuple[Reply, ...] = ()
    #: A retry's delay before the next attempt, in seconds.
    retry_in_s: float | None = None
    #: Inline mode: the job's row after its finish was written.
    job: Job | None = None
    #: What the handler returned, as stored (JSON round trip; docs/results.md).
    result: Any = None

    @property
    def completed(self) -> bool:
        return self.status is Outcome.COMPLETED


def default_policy(backoff: Backoff | None = None) -> RunPolicy:
    """The daemon's run policy with the default settings (worker.retry_base_s/cap_s)."""
    return RunPolicy(backoff or Backoff(DEFAULTS["worker_retry_base_s"],
                                        DEFAULTS["worker_retry_cap_s"]))


async def run_job(
    job_type: str,
    payload: dict[str, Any] | None = None,
    *,
    registry: Registry | None = None,
    attempt: int = 1,
    max_attempts: int | None = None,
    run_retries: bool = False,
    queue: str | None = None,
    tenant_id: str = "default",
    job_id: int = 1,
    traceparent: str | None = None,
    backoff: Backoff | None = None,
) -> JobOutcome:
    """Run ``job_type``'s handler (from ``registry``, else the process-wide one that
    ``@gochatd.job`` fills) once, as attempt ``attempt`` of ``max_attempts`` (the handler's
    by default), and return how it ended. The payload is checked as ``enqueue`` checks it
    (``InvalidJob``) and handed over as decoded JSON, as a worker reads it from its row.

    With ``run_retries`` a retry runs the next attempt at once (no backoff wait) until the
    job completes or is dead; the outcome is the last attempt's. A type with no handler
    ends ``dead`` with error_class ``unknown_job_type``, as in a daemon."""
    if attempt < 1:
        raise ValueError("attempt must be >= 1")
    registry = REGISTRY if registry is None else registry
    request = validate_enqueue(
        job_type, payload, queue=queue, tenant_id=tenant_id, idempotency_key=None,
        scheduled_at=None, delay_s=None, max_attempts=max_attempts, priority=0,
        traceparent=traceparent, max_payload_bytes=DEFAULTS["worker_max_payload_bytes"],
    )
    spec = registry.get(job_type)
    decoded: dict[str, Any] = json.loads(json.dumps(request.payload))
    total = request.max_attempts or (spec.max_attempts if spec else 25)
    policy = default_policy(backoff)
    while True:
        job = _memory_job(job_id, request.tenant_id, job_type,
                          request.queue or (spec.queue if spec else "default"),
                          decoded, attempt, total, traceparent)
        claimed = ClaimedJob(job, OWNER, attempt)
        outcome = _outcome(claimed, *await _execute(claimed, registry, policy))
        if not (run_retries and outcome.status is Outcome.RETRY):
            return outcome
        attempt += 1


def _memory_job(job_id: int, tenant_id: str, job_type: str, queue: str,
                payload: dict[str, Any], attempt: int, max_attempts: int,
                traceparent: str | None) -> Job:
    """The row a claim would have returned: running, with this attempt counted."""
    now = datetime.now(UTC)
    return Job(
        id=job_id, tenant_id=tenant_id, job_type=job_type, queue=queue, payload=payload,
        status=JobStatus.RUNNING, priority=0, attempts=attempt, max_attempts=max_attempts,
        scheduled_at=now, created_at=now, updated_at=now, fence=attempt, locked_by=OWNER,
        locked_at=now, traceparent=traceparent,
    )


async def _execute(claimed: ClaimedJob, registry: Registry,
                   policy: RunPolicy) -> tuple[Finish, Exception | None]:
    """``runner.execute`` on a claimed job, keeping the exception the handler raised."""
    raised: list[Exception] = []
    spec = registry.get(claimed.job.job_type)
    if spec is not None:
        registry = _recording(spec, raised, registry)
    async with _asyncio_loop(spec):
        finish = await execute(ActiveJob(claimed, None), registry, policy)
    assert finish is not None, "only a lost lease writes nothing, and these runs hold theirs"
    return finish, (raised[0] if raised else None)


@contextlib.asynccontextmanager
async def _asyncio_loop(spec: HandlerSpec | None) -> AsyncIterator[None]:
    """An asyncio handler (``runtime="asyncio"``) runs on a trio-asyncio loop, as in the
    daemon: the caller's when one is open, else one opened for this run."""
    if spec is None or spec.runtime != "asyncio" or _current_aio_loop() is not None:
        yield
        return
    async with loop_for({"asyncio"}):
        yield


def _current_aio_loop() -> object | None:
    import trio_asyncio

    loop: object | None = trio_asyncio.current_loop.get()
    return loop


def _recording(spec: HandlerSpec, raised: list[Exception], hooks: Registry) -> Registry:
    """A one-type registry with ``hooks``' layers whose outermost layer notes what the job
    raised (the handler's exception, or a hook's ``HookFailed``), then re-raises it (so the
    runner classifies the very same exception)."""

    async def recorded(ctx: Any, call_next: Callable[[], Awaitable[None]]) -> None:
        try:
            await call_next()
        except Exception as exc:
            raised.append(exc)
            raise

    registry = Registry()
    registry.add(spec)
    registry.layers = (recorded, *hooks.layers)
    return registry


def _outcome(claimed: ClaimedJob, finish: Finish, exception: Exception | None,
             job: Job | None = None) -> JobOutcome:
    return JobOutcome(
        job_type=claimed.job.job_type, status=finish.outcome, attempts=claimed.job.attempts,
        error_class=finish.error_class, error=finish.last_error, exception=exception,
        replies=finish.replies, result=json.loads(finish.result) if finish.result else None,
        retry_in_s=finish.delay_s if finish.outcome is Outcome.RETRY else None, job=job,
    )


# -- inline mode ---------------------------------------------------------------------------


@dataclass(eq=False)
class InlineRun:
    """What ``inline()`` saw: one outcome per job it ran, in the order they ran."""

    registry: Registry
    policy: RunPolicy
    outcomes: list[JobOutcome] = field(default_factory=list)
    #: New jobs that were not due (``delay_s``/``scheduled_at`` in the future): left queued.
    deferred: list[Job] = field(default_factory=list)

    def statuses(self) -> list[Outcome]:
        return [outcome.status for outcome in self.outcomes]

    def check(self) -> None:
        """Before ``Client`` writes: inline runs need Trio (the runner is Trio code). Asked
        of sniffio: under trio-asyncio's loop an asyncio task also sees a Trio token."""
        try:
            library = sniffio.current_async_library()
        except sniffio.AsyncLibraryNotFoundError:
            library = ""
        if library != "trio":
            raise RuntimeError("gochatd.testing.inline() runs handlers under Trio only; "
                               "nothing was enqueued")

    def check_sync(self) -> None:
        """Before ``SyncClient`` writes: its inline runs start a Trio run of their own, which
        cannot nest in a running one."""
        try:
            trio.lowlevel.current_trio_token()
        except RuntimeError:
            return  # not in a Trio run: it may start one
        raise RuntimeError("gochatd.testing.inline(): SyncClient runs its jobs in a Trio run "
                           "of their own; from Trio code use gochatd.Client; nothing was "
                           "enqueued")

    async def __call__(self, store: JobStore, results: Sequence[EnqueueResult]) -> None:
        """``Client``'s hook: claim, run and finish each new job through ``store``."""
        for result in _new(results):
            if not await self._run_one(store, result.job, self.policy):
                self.deferred.append(result.job)

    async def run_workflow(self, store: JobStore, results: Sequence[EnqueueResult]) -> None:
        """``Client``'s hook for a workflow write (``depends_on``, a chain, a batch): each
        new job that is due runs, then each one those runs released, until a pass runs none
        (each job once). A job still waiting on one outside the write stays queued
        (``deferred``); one a failed dependency cancelled never runs. Handlers read their
        dependencies (``ctx.dependencies()``) as in a daemon."""
        policy = dataclasses.replace(self.policy, links=store.job_links)
        waiting = [r.job for r in _new(results)]
        while waiting:
            left = [job for job in waiting if not await self._run_one(store, job, policy)]
            if len(left) == len(waiting):
                break
            waiting = left
        rows = [await store.get_job(job.id) for job in waiting]
        self.deferred.extend(r for r in rows if r is not None and r.status is JobStatus.QUEUED)

    async def _run_one(self, store: JobStore, job: Job, policy: RunPolicy) -> bool:
        """Claim, run and finish one job; False when it could not be claimed (not due)."""
        claimed = await store.claim_jobs([job.id], OWNER, INLINE_LEASE_S)
        if not claimed:
            return False
        finish, exception = await _execute(claimed[0], self.registry, policy)
        # Written as the finisher writes it: fenced, replies with a completion.
        applied = await store.finish_jobs([finish])
        self._record(claimed[0], finish, exception, applied, await store.get_job(finish.job_id))
        return True

    def run_sync(self, store: SyncInlineStore, results: Sequence[EnqueueResult]) -> None:
        """``SyncClient``'s hook: the same, its store's units run on the calling thread and
        each handler in a Trio run of its own."""
        for result in _new(results):
            if not self._run_one_sync(store, result.job, self.policy):
                self.deferred.append(result.job)

    def run_workflow_sync(self, store: SyncInlineStore, results: Sequence[EnqueueResult]) -> None:
        """``run_workflow`` for ``SyncClient``."""
        async def links(job_id: int) -> JobLinks | None:
            return store.job_links(job_id)

        policy = dataclasses.replace(self.policy, links=links)
        waiting = [r.job for r in _new(results)]
        while waiting:
            left = [job for job in waiting if not self._run_one_sync(store, job, policy)]
            if len(left) == len(waiting):
                break
            waiting = left
        rows = [store.get_job(job.id) for job in waiting]
        self.deferred.extend(r for r in rows if r is not None and r.status is JobStatus.QUEUED)

    def _run_one_sync(self, store: SyncInlineStore, job: Job, policy: RunPolicy) -> bool:
        claimed = store.claim_jobs(job, OWNER, INLINE_LEASE_S)
        if not claimed:
            return False
        finish, exception = trio.run(_execute, claimed[0], self.registry, policy)
        applied = store.finish_jobs(job, finish)
        self._record(claimed[0], finish, exception, applied, store.get_job(finish.job_id))
        return True

    def _record(self, claimed: ClaimedJob, finish: Finish, exception: Exception | None,
                applied: set[int], row: Job | None) -> None:
        if claimed.id not in applied:
            raise RuntimeError(f"inline: job {claimed.id}'s finish was not applied")
        self.outcomes.append(_outcome(claimed, finish, exception, row))


def _new(results: Sequence[EnqueueResult]) -> list[EnqueueResult]:
    """The jobs an enqueue created (an existing job, same idempotency key, is not run)."""
    return [r for r in results if r.created and not r.conflict]


async def migrate(database_url: str) -> None:
    """Create or upgrade the schema at ``database_url`` (as ``gochatd db upgrade`` does): a
    test's fresh SQLite file or PostgreSQL database, before a ``Client`` uses it."""
    store = open_store(database_url)
    await store.open()
    try:
        await store.migrate()
    finally:
        await store.close()


@contextlib.contextmanager
def inline(*, registry: Registry | None = None,
           backoff: Backoff | None = None) -> Iterator[InlineRun]:
    """Within the block, ``Client.enqueue`` and ``enqueue_many`` (and ``SyncClient``'s) run
    each new, due job at
    once after its row commits, and return when the jobs have finished (their final state
    written). Yields the ``InlineRun`` that lists the outcomes. Scoped to the current task
    and the tasks it starts (a context variable), so concurrent tests do not see it."""
    run = InlineRun(REGISTRY if registry is None else registry, default_policy(backoff))
    token = INLINE.set(run)
    try:
        yield run
    finally:
        INLINE.reset(token)


__all__ = ["INLINE_LEASE_S", "OWNER", "InlineRun", "JobOutcome", "inline", "migrate", "run_job"]
