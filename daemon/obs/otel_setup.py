"""The SDK from the standard ``OTEL_*`` variables, for the command line (docs/otel.md).

Imported only when ``OTEL_TRACES_EXPORTER`` asks for it. ``otlp`` exports over OTLP/HTTP
(protobuf) to ``OTEL_EXPORTER_OTLP_TRACES_ENDPOINT`` / ``OTEL_EXPORTER_OTLP_ENDPOINT``;
``console`` writes the spans to stderr. The exporter and the batch processor read their
other variables themselves (timeouts, headers, ``OTEL_BSP_*``), the resource reads
``OTEL_SERVICE_NAME`` and ``OTEL_RESOURCE_ATTRIBUTES`` (service.name ``gochatd`` otherwise).
"""

from __future__ import annotations

import os
import sys
from collections.abc import Callable

from gochatd.errors import ConfigError

INSTALL_HINT = "pip install 'gochatd[otel-otlp]'"
#: How long the exit waits for the last spans to leave.
FLUSH_TIMEOUT_MS = 5_000


def sdk_provider(wanted: str, *, installed: bool) -> Callable[[], None]:
    """Set the global tracer provider; return what flushes and shuts it down."""
    if wanted not in ("otlp", "console"):
        raise ConfigError(f"OTEL_TRACES_EXPORTER: expected otlp, console or none, not {wanted!r}")
    protocol = (os.environ.get("OTEL_EXPORTER_OTLP_TRACES_PROTOCOL")
                or os.environ.get("OTEL_EXPORTER_OTLP_PROTOCOL") or "http/protobuf").strip()
    if wanted == "otlp" and protocol != "http/protobuf":
        raise ConfigError(f"OTEL_EXPORTER_OTLP_PROTOCOL: gochatd exports http/protobuf, not {protocol!r}")
    if not installed:
        raise ConfigError(f"OTEL_TRACES_EXPORTER is set but opentelemetry is not installed: {INSTALL_HINT}")
    try:
        from opentelemetry import trace
        from opentelemetry.sdk.resources import Resource
        from opentelemetry.sdk.trace import TracerProvider
        from opentelemetry.sdk.trace.export import BatchSpanProcessor, ConsoleSpanExporter, SpanExporter
        if wanted == "otlp":
            from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter
    except ImportError:
        raise ConfigError(f"OTEL_TRACES_EXPORTER={wanted} needs the OpenTelemetry SDK and its "
                          f"OTLP/HTTP exporter: {INSTALL_HINT}") from None
    if not isinstance(trace.get_tracer_provider(), trace.ProxyTracerProvider | trace.NoOpTracerProvider):
        return lambda: None  # set already (opentelemetry-instrument, sitecustomize): that one exports
    resource = Resource.create()
    if str(resource.attributes.get("service.name", "")).startswith("unknown_service"):
        resource = resource.merge(Resource({"service.name": "gochatd"}))
    exporter: SpanExporter = OTLPSpanExporter() if wanted == "otlp" else ConsoleSpanExporter(out=sys.stderr)
    provider = TracerProvider(resource=resource)
    provider.add_span_processor(BatchSpanProcessor(exporter))
    trace.set_tracer_provider(provider)

    def shutdown() -> None:
        provider.force_flush(FLUSH_TIMEOUT_MS)
        provider.shutdown()

    return shutdown
