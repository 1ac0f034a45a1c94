"""The spans gochatd ends in a test, kept by the SDK's in-memory exporter (docs/otel.md):
``recorded`` puts a ``Spans`` on its own tracer provider in ``otel.SPANS``."""

from __future__ import annotations

import pytest
from opentelemetry.sdk.trace import ReadableSpan, TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from opentelemetry.trace import SpanKind

from gochatd.obs import otel
from gochatd.obs.otel_spans import Spans
from tests.support.wait import wait_until


class Recorded:
    """The spans gochatd ended, kept by the SDK's in-memory exporter."""

    def __init__(self) -> None:
        self.exporter = InMemorySpanExporter()
        provider = TracerProvider()
        provider.add_span_processor(SimpleSpanProcessor(self.exporter))
        self.spans = Spans(provider)

    def all(self) -> list[ReadableSpan]:
        return list(self.exporter.get_finished_spans())

    def named(self, prefix: str, kind: SpanKind) -> list[ReadableSpan]:
        return [s for s in self.all() if s.name.startswith(prefix) and s.kind is kind]

    async def wait_for(self, prefix: str, kind: SpanKind, n: int = 1) -> list[ReadableSpan]:
        async def probe() -> list[ReadableSpan] | None:
            found = self.named(prefix, kind)
            return found if len(found) >= n else None

        return await wait_until(probe, timeout_s=10.0, what=f"{n} {kind.name} span(s) {prefix}")


def record_spans(monkeypatch: pytest.MonkeyPatch) -> Recorded:
    """A ``recorded`` fixture's body: gochatd's spans go to a fresh ``Recorded``."""
    spans = Recorded()
    monkeypatch.setattr(otel, "SPANS", spans.spans)
    return spans


def traceparent(span: ReadableSpan) -> str:
    ctx = span.get_span_context()
    assert ctx is not None
    return f"00-{ctx.trace_id:032x}-{ctx.span_id:016x}-{ctx.trace_flags:02x}"


def parent_of(child: ReadableSpan) -> str:
    """``traceparent`` of the child's parent span, as it would be written downstream."""
    ctx, parent = child.get_span_context(), child.parent
    assert ctx is not None and parent is not None
    return f"00-{parent.trace_id:032x}-{parent.span_id:016x}-{parent.trace_flags:02x}"
