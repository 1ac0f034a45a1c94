"""One delivery attempt, end to end: provider answer -> fenced state change.

The row is leased to this sender (``lease_owner``, ``attempts``); every write names both,
so a sender whose lease was reaped and re-claimed elsewhere writes nothing. Nothing here
raises for a provider's failure: every answer becomes sent, retry or dead.
"""

from __future__ import annotations

from dataclasses import dataclass

import structlog

from gochatd.errors import StoreUnavailable
from gochatd.obs import otel
from gochatd.outbox.metrics import OutboxMetrics
from gochatd.outbox.model import OutboxMessage
from gochatd.outbox.providers import Delivery, DeliveryOutcome, Provider
from gochatd.store import JobStore


@dataclass(frozen=True, slots=True)
class SendPolicy:
    owner: str
    max_attempts: int


@dataclass(frozen=True, slots=True)
class SendResult:
    #: sent, retry, dead or stale (the lease was no longer ours: nothing written)
    outcome: str
    #: For a retry: when the row comes due again, in seconds from now.
    retry_in_s: float | None = None


async def deliver_one(
    message: OutboxMessage,
    provider: Provider,
    store: JobStore,
    policy: SendPolicy,
    metrics: OutboxMetrics,
    log: structlog.typing.FilteringBoundLogger,
) -> SendResult:
    """Deliver ``message`` and record the result; returns what happened. With
    OpenTelemetry (obs/otel.py), inside the delivery's span."""
    spans = otel.SPANS
    if spans is None:
        return await _deliver(message, provider, store, policy, metrics, log)
    result: SendResult = await spans.deliver(
        message.id, message.channel, message.attempts, message.job_id,
        lambda: _deliver(message, provider, store, policy, metrics, log))
    return result


async def _deliver(
    message: OutboxMessage,
    provider: Provider,
    store: JobStore,
    policy: SendPolicy,
    metrics: OutboxMetrics,
    log: structlog.typing.FilteringBoundLogger,
) -> SendResult:
    try:
        result = await provider.deliver(message)
    except Exception as exc:  # a provider bug must not kill the loop; the row retries
        result = Delivery(DeliveryOutcome.RETRY, type(exc).__name__)
    ids = {"outbox_id": message.id, "channel": message.channel, "attempt": message.attempts}
    try:
        return await _record(message, result, provider, store, policy, metrics, log, ids)
    except StoreUnavailable as exc:
        # The lease expires and the row is delivered again, with the same Idempotency-Key.
        log.warning("outbox_record_failed", error=str(exc), **ids)
        return SendResult("stale")


async def _record(
    message: OutboxMessage, result: Delivery, provider: Provider, store: JobStore,
    policy: SendPolicy, metrics: OutboxMetrics, log: structlog.typing.FilteringBoundLogger,
    ids: dict[str, object],
) -> SendResult:
    if result.outcome is DeliveryOutcome.SENT:
        latency = await store.complete_outbox(message, policy.owner, result.provider_message_id)
        if latency is None:
            log.warning("outbox_stale_lease", **ids)
            return SendResult("stale")
        metrics.sent.labels(message.channel).inc()
        metrics.latency.labels(message.channel).observe(latency)
        log.info("outbox_sent", latency_s=round(latency, 4), **ids)
        return SendResult("sent")
    error_class = result.error_class or "error"
    metrics.failed.labels(message.channel, error_class).inc()
    if result.outcome is DeliveryOutcome.RETRY and message.attempts < policy.max_attempts:
        delay_s = (result.retry_after_s if result.retry_after_s is not None
                   else provider.backoff_s(message.attempts))
        if not await store.retry_outbox(message, policy.owner, delay_s, error_class):
            log.warning("outbox_stale_lease", **ids)
            return SendResult("stale")
        log.warning("outbox_retry", error_class=error_class, delay_s=round(delay_s, 3), **ids)
        return SendResult("retry", delay_s)
    if not await store.fail_outbox(message, policy.owner, error_class):
        log.warning("outbox_stale_lease", **ids)
        return SendResult("stale")
    log.warning("outbox_dead", error_class=error_class,
                exhausted=result.outcome is DeliveryOutcome.RETRY, **ids)
    return SendResult("dead")
