"""Runs one claimed job in its own cancel scope and turns how it ended into a ``Finish``.

Outcomes are kept apart: a handler error (retry/dead), a timeout (retry, error_class
``timeout``), an operator cancel (cancelled), a shutdown interruption (back to retrying,
attempt refunded) and a lost lease (nothing may be written).
"""

from __future__ import annotations

import enum
import math
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

import trio
from structlog.typing import FilteringBoundLogger

from gochatd.config.fields import DEFAULTS
from gochatd.context import JobContext, LinksReader
from gochatd.dispatch.entries import StreamEntry
from gochatd.errors import HandlerFailure, HookFailed, NonRetryable
from gochatd.hooks import run_layers
from gochatd.model import ClaimedJob, Finish, Outcome, Reply
from gochatd.obs import otel
from gochatd.obs.logs import get_logger
from gochatd.obs.redact import redact_error
from gochatd.results.encode import NO_RESULT, encode_result
from gochatd.retry import Backoff, next_delay_s
from gochatd.store.rows import InvalidPayload
from gochatd.worker.registry import HandlerSpec, Registry, SysFailError
from gochatd.worker.runtimes import timeout_message

if TYPE_CHECKING:
    from gochatd.config.settings import Settings


class StopReason(enum.Enum):
    INTERRUPTED = "interrupted"  # daemon shutdown
    CANCELLED = "cancelled"  # operator cancel seen by the heartbeat
    LEASE_LOST = "lease_lost"  # heartbeat found another owner/fence


@dataclass(eq=False)
class ActiveJob:
    claimed: ClaimedJob
    entry: StreamEntry | None
    scope: trio.CancelScope = field(default_factory=trio.CancelScope)
    stop_reason: StopReason | None = None
    handler_done: bool = False

    def stop(self, reason: StopReason) -> None:
        if self.stop_reason is None and not self.handler_done:
            self.stop_reason = reason
            self.scope.cancel()


@dataclass(frozen=True, slots=True)
class RunPolicy:
    backoff: Backoff
    default_timeout_s: float | None = None
    #: Handlers for job types without a registered Python handler (config handlers.http).
    fallback: Callable[[str], HandlerSpec | None] | None = None
    #: ``worker.max_result_bytes``: the largest result a completion stores (docs/results.md).
    max_result_bytes: int = DEFAULTS["worker_max_result_bytes"]
    #: The store's read of a job's dependencies (``ctx.dependencies()``, docs/workflows.md).
    links: LinksReader | None = None

    @classmethod
    def from_settings(cls, settings: Settings,
                      fallback: Callable[[str], HandlerSpec | None] | None = None,
                      links: LinksReader | None = None) -> RunPolicy:
        return cls(Backoff(settings.worker_retry_base_s, settings.worker_retry_cap_s),
                   fallback=fallback, max_result_bytes=settings.worker_max_result_bytes,
                   links=links)


async def execute(active: ActiveJob, registry: Registry, policy: RunPolicy) -> Finish | None:
    """Run the handler; return the fenced state change to write, or None if none may be.
    With OpenTelemetry (obs/otel.py), inside the run's consumer span."""
    spans = otel.SPANS
    if spans is None:
        return await _execute(active, registry, policy)
    job = active.claimed.job
    return await spans.run(job.id, job.job_type, job.queue, job.attempts, job.traceparent,
                           _execute(active, registry, policy))


async def _execute(active: ActiveJob, registry: Registry, policy: RunPolicy) -> Finish | None:
    claimed = active.claimed
    job = claimed.job
    log = _job_logger(claimed)
    spec = _handler_for(active, registry, policy, log)
    if isinstance(spec, Finish):
        return spec
    ctx = JobContext(
        job_id=job.id, job_type=job.job_type, queue=job.queue, tenant_id=job.tenant_id,
        payload=job.payload, attempt=job.attempts, max_attempts=job.max_attempts,
        fence=claimed.fence, log=log, traceparent=job.traceparent, links=policy.links,
    )
    timeout_s = spec.timeout_s or policy.default_timeout_s or math.inf
    error: BaseException | None = None
    value: Any = None
    started = trio.current_time()
    # One cancel scope per job (they cost ~15 µs each): the timeout is its deadline, and a
    # stop (interrupt, operator cancel, lost lease) cancels it with a reason recorded.
    if timeout_s != math.inf:  # a new scope's deadline is already inf (setting it: ~4 µs)
        active.scope.deadline = started + timeout_s
    with active.scope:
        try:
            if registry.layers:  # hooks (hooks.py), in the job's scope like the handler
                value = await run_layers(registry.layers, spec.fn, ctx)
            else:
                value = await spec.fn(ctx)
        except Exception as exc:
            error = exc
    active.handler_done = True
    timed_out = active.scope.cancelled_caught and active.stop_reason is None
    duration_s = trio.current_time() - started
    if active.stop_reason is not None:
        return _stopped(claimed, active.stop_reason, log, duration_s)
    if error is None and not timed_out:
        return _completed(claimed, ctx, value, policy.max_result_bytes, log, duration_s)
    return _failed(claimed, policy, log, error,
                   timeout_message(spec.runtime, timeout_s) if timed_out else None)


def _completed(claimed: ClaimedJob, ctx: JobContext, value: Any, max_result_bytes: int,
               log: FilteringBoundLogger, duration_s: float) -> Finish:
    """The completion, with the handler's result (results/encode.py); a result that cannot
    be stored makes the job dead instead (never truncated, never quoted)."""
    encoded = encode_result(value, max_result_bytes) if value is not None else NO_RESULT
    if encoded.problem is not None:
        error_class, message = encoded.problem
        log.warning("job_dead", error_class=error_class, exhausted=False)
        return _finish(claimed, Outcome.DEAD, error_class, message)
    # Debug: one info line per job is a cost every job pays (failures stay at info+).
    log.debug("job_completed", duration_s=round(duration_s, 4), replies=len(ctx.replies))
    # Replies travel only with a completion; every other outcome drops them.
    return _finish(claimed, Outcome.COMPLETED, replies=tuple(ctx.replies), result=encoded.text)


def _job_logger(claimed: ClaimedJob) -> FilteringBoundLogger:
    job = claimed.job
    parts = (job.traceparent or "").split("-")
    trace_id = parts[1] if len(parts) >= 4 else None
    return get_logger(
        job_id=job.id, job_type=job.job_type, queue=job.queue, tenant_id=job.tenant_id,
        attempt=job.attempts, fence=claimed.fence, trace_id=trace_id,
    )


def _finish(claimed: ClaimedJob, outcome: Outcome, error_class: str | None = None,
            message: str | None = None, delay_s: float = 0.0,
            replies: tuple[Reply, ...] = (), shown: str | None = None,
            result: str | None = None) -> Finish:
    """``shown``: the one payload string the error may quote (sys:fail's ``message``)."""
    job = claimed.job
    keep = (shown,) if shown is not None else ()
    return Finish(
        job_id=job.id, lease_owner=claimed.lease_owner, fence=claimed.fence,
        outcome=outcome, delay_s=delay_s, error_class=error_class,
        last_error=redact_error(message, job.payload, keep=keep) if message is not None else None,
        replies=replies, tenant_id=job.tenant_id, result=result,
    )


def _handler_for(active: ActiveJob, registry: Registry, policy: RunPolicy,
                 log: FilteringBoundLogger) -> HandlerSpec | Finish:
    """The job's handler, or the dead finish of a job that cannot run at all."""
    claimed = active.claimed
    job = claimed.job
    if isinstance(job.payload, InvalidPayload):
        log.warning("job_invalid_payload", reason=job.payload.reason)
        active.handler_done = True
        return _finish(claimed, Outcome.DEAD, "invalid_payload",
                       f"the stored payload cannot be decoded ({job.payload.reason})")
    spec = registry.get(job.job_type)
    if spec is None and policy.fallback is not None:
        spec = policy.fallback(job.job_type)
    if spec is None:
        log.warning("job_unknown_type")
        active.handler_done = True
        return _finish(claimed, Outcome.DEAD, "unknown_job_type",
                       f"no handler for job type {job.job_type!r}")
    return spec


def _stopped(claimed: ClaimedJob, reason: StopReason, log: FilteringBoundLogger,
             duration_s: float) -> Finish | None:
    if reason is StopReason.LEASE_LOST:
        log.warning("job_lease_lost", duration_s=round(duration_s, 4))
        return None
    if reason is StopReason.INTERRUPTED:
        log.info("job_interrupted", duration_s=round(duration_s, 4))
        return _finish(claimed, Outcome.INTERRUPTED, "interrupted",
                       "interrupted by worker shutdown")
    log.info("job_cancelled", duration_s=round(duration_s, 4))
    return _finish(claimed, Outcome.CANCELLED, "cancelled", "cancelled by operator")


def _failed(claimed: ClaimedJob, policy: RunPolicy, log: FilteringBoundLogger,
            error: BaseException | None, timed_out: str | None) -> Finish:
    """A handler error or a timeout: retry with backoff, or dead."""
    job = claimed.job
    requested_s: float | None = None
    message: str | None
    if timed_out is not None:
        error_class, retryable, message = "timeout", True, timed_out
    else:
        assert error is not None
        hook_text = str(error) if isinstance(error, HookFailed) else None
        if isinstance(error, HookFailed):  # classified as what the hook raised
            error = error.error
        retryable = not isinstance(error, NonRetryable)
        error_class = "non_retryable" if not retryable else type(error).__name__
        if isinstance(error, HandlerFailure):
            retryable, error_class, requested_s = error.retryable, error.error_class, error.retry_after_s
        message = hook_text or error_text(error, error_class)
    shown = str(error) if isinstance(error, SysFailError) else None
    delay_s = (
        next_delay_s(policy.backoff, job.attempts, job.max_attempts, requested_s)
        if retryable else None
    )
    if delay_s is not None:
        log.warning("job_retry", error_class=error_class, delay_s=round(delay_s, 3))
        return _finish(claimed, Outcome.RETRY, error_class, message, delay_s, shown=shown)
    log.warning("job_dead", error_class=error_class, exhausted=retryable)
    return _finish(claimed, Outcome.DEAD, error_class, message, shown=shown)


def error_text(error: BaseException, error_class: str) -> str | None:
    """The stored ``last_error`` of a handler's exception: its text, after its class name
    unless ``error_class`` already says it (``SysFailError``, a ``HandlerFailure``'s own
    class, a plain ``NonRetryable``), since every view shows ``error_class: last_error``."""
    text = str(error)
    name = type(error).__name__
    if name == error_class or isinstance(error, HandlerFailure) or type(error) is NonRetryable:
        return text or None
    return f"{name}: {text}" if text else name
