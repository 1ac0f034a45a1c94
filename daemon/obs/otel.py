"""The OpenTelemetry switch: ``SPANS`` is None unless opentelemetry-api is importable.

Every hook in the job's path reads ``otel.SPANS`` once and checks it for None; nothing else
is paid without the extra, and nothing of opentelemetry is imported. With it installed,
``SPANS`` (``otel_spans.Spans``) emits the spans of docs/otel.md through the global tracer
provider: the user's, or the SDK set up from the standard ``OTEL_*`` variables by
``exporting_from_env`` (the command line does, when ``OTEL_TRACES_EXPORTER`` is set).
"""

from __future__ import annotations

import contextlib
import importlib.util
import os
from collections.abc import Iterator
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from gochatd.obs.otel_spans import Spans

#: The variable that asks the command line to set up the SDK (``otlp``, ``console``, ``none``).
EXPORTER_ENV = "OTEL_TRACES_EXPORTER"


def _load() -> Spans | None:
    try:
        if importlib.util.find_spec("opentelemetry") is None:
            return None
        from gochatd.obs.otel_spans import Spans
    except ImportError:  # a part missing (only opentelemetry-proto, say): no traces
        return None
    return Spans()


#: The span factory, or None without opentelemetry-api (the hot path checks only this).
SPANS: Spans | None = _load()


@contextlib.contextmanager
def exporting_from_env() -> Iterator[None]:
    """With ``OTEL_TRACES_EXPORTER`` set (and not ``none``): an SDK tracer provider that
    exports as the ``OTEL_*`` variables say, for the duration; its spans are flushed on
    the way out. A value gochatd cannot honour is a ``ConfigError``."""
    wanted = os.environ.get(EXPORTER_ENV, "").strip().lower()
    if not wanted or wanted == "none":
        yield
        return
    from gochatd.obs.otel_setup import sdk_provider

    shutdown = sdk_provider(wanted, installed=SPANS is not None)
    try:
        yield
    finally:
        shutdown()
