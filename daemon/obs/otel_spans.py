"""The spans gochatd emits (docs/otel.md), on OpenTelemetry's messaging conventions.

Imported only through ``otel.SPANS``, when opentelemetry-api is installed. Attributes name
the job (id, type, queue, tenant, attempt) and how it ended; never a payload, a URL's
credentials, a DSN or a token.
"""

from __future__ import annotations

import contextlib
import dataclasses
import os
from collections.abc import Awaitable, Callable, Coroutine, Iterator, Sequence
from typing import Any
from urllib.parse import urlsplit

from opentelemetry import trace
from opentelemetry.context import Context
from opentelemetry.environment_variables import OTEL_PYTHON_TRACER_PROVIDER
from opentelemetry.trace import Span, SpanKind, Status, StatusCode
from opentelemetry.trace.propagation.tracecontext import TraceContextTextMapPropagator

from gochatd.model import EnqueueRequest, EnqueueResult, Finish, Outcome
from gochatd.workflows.model import Workflow, WorkflowResult

SYSTEM = "gochatd"
#: Outcomes that are not a success: the span's status is ERROR, ``error.type`` the class.
FAILED = frozenset({Outcome.RETRY, Outcome.DEAD})
HttpAnswer = tuple[int, float | None, bytes | None]

_PROPAGATOR = TraceContextTextMapPropagator()
_UNKNOWN = object()  # an API without the module global (see Spans._off)


def _parent(traceparent: str | None) -> Context | None:
    """The context a ``traceparent`` names (None: the caller's current one)."""
    return _PROPAGATOR.extract({"traceparent": traceparent}) if traceparent else None


def traceparent_of(span: Span) -> str | None:
    """The W3C ``traceparent`` that makes ``span`` the parent downstream (None if invalid)."""
    if not span.get_span_context().is_valid:
        return None
    carrier: dict[str, str] = {}
    _PROPAGATOR.inject(carrier, context=trace.set_span_in_context(span))
    return carrier.get("traceparent")


def _one(values: Sequence[str | None]) -> str | None:
    return values[0] if values and all(v == values[0] for v in values) else None


def _carrying(flow: Workflow, requests: Sequence[EnqueueRequest]) -> Workflow:
    """The workflow with its items' requests replaced (each carrying the span's context)."""
    return dataclasses.replace(flow, items=tuple(
        dataclasses.replace(item, request=request)
        for item, request in zip(flow.items, requests, strict=True)))


class Spans:
    """The tracer of ``gochatd``: a producer span per enqueue, a consumer span per run, a
    client span per HTTP-handler call and a producer span per outbox delivery."""

    def __init__(self, provider: trace.TracerProvider | None = None) -> None:
        """``provider``: the global one by default (which may be set later)."""
        self._on = provider is not None
        self._env_provider = OTEL_PYTHON_TRACER_PROVIDER in os.environ
        self._tracer = trace.get_tracer("gochatd", tracer_provider=provider)

    def _off(self) -> bool:
        """No tracer provider is configured: spans would all be no-ops, so none is started
        (the API's no-op path costs tens of microseconds a job; this check, well under one)."""
        if self._on:
            return False
        # The API's own global first: get_tracer_provider() reads the environment on each
        # call while none is set (~4 µs, a tenth of a no-op job's cost on the daemon's thread).
        # A provider named by that environment variable is loaded by the call below.
        if not self._env_provider and getattr(trace, "_TRACER_PROVIDER", _UNKNOWN) is None:
            return True
        self._on = not isinstance(trace.get_tracer_provider(),
                                  trace.ProxyTracerProvider | trace.NoOpTracerProvider)
        return not self._on  # a provider, once set, stays (the API refuses another)

    @contextlib.contextmanager
    def _span(self, name: str, *, kind: SpanKind, attributes: dict[str, Any],
              context: Context | None = None) -> Iterator[Span]:
        """A current span; an exception out of it sets ``error.type`` to its class, never
        its text (which might quote a value gochatd keeps out of spans)."""
        with self._tracer.start_as_current_span(
            name, context=context, kind=kind, attributes=attributes, record_exception=False,
            set_status_on_exception=False,
        ) as span:
            try:
                yield span
            except Exception as exc:
                span.set_attribute("error.type", type(exc).__name__)
                span.set_status(Status(StatusCode.ERROR))
                raise

    # -- enqueue: Client, SyncClient (and so the CLI and the gateway) ----------------------

    @contextlib.contextmanager
    def _producing(self, requests: Sequence[EnqueueRequest], batch: bool
                   ) -> Iterator[tuple[Span, list[EnqueueRequest]]]:
        """The producer span around one write. A ``traceparent`` every request shares (one
        job's, a gateway request's) is the span's parent, else the current span is; each
        request carries the span's context, but for one with another ``traceparent`` of its
        own (in a batch), which keeps it."""
        queue = _one([r.queue for r in requests])
        attributes: dict[str, Any] = {
            "messaging.system": SYSTEM, "messaging.operation.type": "send",
            "messaging.operation.name": "enqueue",
        }
        job_type, tenant = _one([r.job_type for r in requests]), _one([r.tenant_id for r in requests])
        if job_type is not None:
            attributes["gochatd.job.type"] = job_type
        if tenant is not None:
            attributes["gochatd.tenant_id"] = tenant
        if batch:
            attributes["messaging.batch.message_count"] = len(requests)
        shared = _one([r.traceparent for r in requests])
        with self._span(
            f"enqueue {queue}" if queue else "enqueue", context=_parent(shared),
            kind=SpanKind.PRODUCER, attributes=attributes,
        ) as span:
            own = traceparent_of(span)
            carried = [r if own is None or r.traceparent not in (None, shared) else
                       dataclasses.replace(r, traceparent=own) for r in requests]
            yield span, carried

    @staticmethod
    def _produced(span: Span, results: Sequence[EnqueueResult]) -> None:
        queue = _one([r.job.queue for r in results])
        if queue is not None:
            span.update_name(f"enqueue {queue}")
            span.set_attribute("messaging.destination.name", queue)
        if len(results) == 1:
            span.set_attribute("messaging.message.id", str(results[0].job.id))
            span.set_attribute("gochatd.job.created", results[0].created)
        span.set_attribute("gochatd.jobs.created", sum(1 for r in results if r.created))

    async def enqueue_async(self, write: Callable[[EnqueueRequest], Awaitable[EnqueueResult]],
                            request: EnqueueRequest) -> EnqueueResult:
        if self._off():
            return await write(request)
        with self._producing([request], batch=False) as (span, [carried]):
            result = await write(carried)
            self._produced(span, [result])
            return result

    async def enqueue_many_async(
        self, write: Callable[[list[EnqueueRequest]], Awaitable[list[EnqueueResult]]],
        requests: list[EnqueueRequest],
    ) -> list[EnqueueResult]:
        if self._off():
            return await write(requests)
        with self._producing(requests, batch=True) as (span, carried):
            results = await write(carried)
            self._produced(span, results)
            return results

    def enqueue_sync(self, write: Callable[[EnqueueRequest], EnqueueResult],
                     request: EnqueueRequest) -> EnqueueResult:
        if self._off():
            return write(request)
        with self._producing([request], batch=False) as (span, [carried]):
            result = write(carried)
            self._produced(span, [result])
            return result

    def enqueue_many_sync(self, write: Callable[[list[EnqueueRequest]], list[EnqueueResult]],
                          requests: list[EnqueueRequest]) -> list[EnqueueResult]:
        if self._off():
            return write(requests)
        with self._producing(requests, batch=True) as (span, carried):
            results = write(carried)
            self._produced(span, results)
            return results

    async def enqueue_workflow_async(
        self, write: Callable[[Workflow], Awaitable[WorkflowResult]], flow: Workflow
    ) -> WorkflowResult:
        """A workflow write (depends_on, a chain, a batch): one producer span, as a batch."""
        if self._off():
            return await write(flow)
        with self._producing([i.request for i in flow.items], batch=True) as (span, carried):
            written = await write(_carrying(flow, carried))
            self._produced(span, written.results)
            return written

    def enqueue_workflow_sync(self, write: Callable[[Workflow], WorkflowResult],
                              flow: Workflow) -> WorkflowResult:
        if self._off():
            return write(flow)
        with self._producing([i.request for i in flow.items], batch=True) as (span, carried):
            written = write(_carrying(flow, carried))
            self._produced(span, written.results)
            return written

    # -- a run: the consumer span, the child of the enqueue's context ----------------------

    async def run(self, job_id: int, job_type: str, queue: str, attempt: int,
                  traceparent: str | None, execute: Coroutine[Any, Any, Finish | None]
                  ) -> Finish | None:
        """``execute`` (the runner's run of one claimed job) inside its consumer span."""
        if self._off():
            return await execute
        with self._span(
            f"run {queue}", context=_parent(traceparent) or Context(), kind=SpanKind.CONSUMER,
            attributes={
                "messaging.system": SYSTEM, "messaging.operation.type": "process",
                "messaging.operation.name": "run", "messaging.destination.name": queue,
                "messaging.message.id": str(job_id), "gochatd.job.type": job_type,
                "gochatd.job.attempt": attempt,
            },
        ) as span:
            finish = await execute
            span.set_attribute("gochatd.job.outcome",
                               finish.outcome.value if finish is not None else "lease_lost")
            if finish is None or finish.outcome in FAILED:
                error = finish.error_class if finish is not None else "lease_lost"
                span.set_attribute("error.type", error or "error")
                span.set_status(Status(StatusCode.ERROR, error))
            return finish

    # -- calls out: an HTTP handler, an outbox delivery -----------------------------------

    async def http_call(self, url: str, headers: dict[str, str], traceparent: str | None,
                        post: Callable[[], Awaitable[HttpAnswer]]) -> HttpAnswer:
        """One HTTP-handler POST in a client span whose context goes in ``traceparent``
        (with no provider: the job's ``traceparent``, as without OpenTelemetry)."""
        if self._off():
            if traceparent:
                headers["traceparent"] = traceparent
            return await post()
        parts = urlsplit(url)
        with self._span("POST", kind=SpanKind.CLIENT, attributes={
            "http.request.method": "POST", "server.address": parts.hostname or "",
            "server.port": parts.port or (443 if parts.scheme == "https" else 80),
            "url.path": parts.path or "/",
        }) as span:
            self.inject(headers)
            answer = await post()
            span.set_attribute("http.response.status_code", answer[0])
            if answer[0] >= 400:
                span.set_attribute("error.type", str(answer[0]))
                span.set_status(Status(StatusCode.ERROR))
            return answer

    async def deliver(self, outbox_id: int, channel: str, attempt: int, job_id: int | None,
                      send: Callable[[], Awaitable[Any]]) -> Any:
        """One outbox delivery (``send`` returns a ``SendResult``) in a producer span; the
        provider sends the span's context downstream (``inject``)."""
        if self._off():
            return await send()
        attributes: dict[str, Any] = {
            "messaging.system": SYSTEM, "messaging.operation.type": "send",
            "messaging.operation.name": "deliver", "messaging.destination.name": channel,
            "messaging.message.id": str(outbox_id), "gochatd.outbox.attempt": attempt,
        }
        if job_id is not None:
            attributes["gochatd.job.id"] = job_id
        with self._span(f"deliver {channel}", kind=SpanKind.PRODUCER,
                                                attributes=attributes) as span:
            result = await send()
            outcome = str(getattr(result, "outcome", ""))
            span.set_attribute("gochatd.outbox.outcome", outcome)
            if outcome in ("retry", "dead"):
                span.set_status(Status(StatusCode.ERROR, outcome))
            return result

    @staticmethod
    def inject(headers: dict[str, str]) -> None:
        """The current span's ``traceparent`` (and ``tracestate``) into outgoing headers."""
        _PROPAGATOR.inject(headers)
