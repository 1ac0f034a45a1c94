"""A handler a daemon imports with ``--handlers`` (tests/e2e/test_otel_export.py): it logs
which OpenTelemetry modules its process holds while it runs."""

from __future__ import annotations

import sys

import gochatd
from gochatd.context import JobContext

PROBE = "e2e:otel_probe"
#: gochatd's modules that import opentelemetry (gochatd.obs.otel, the switch, does not).
OTEL_MODULES = ("gochatd.obs.otel_spans", "gochatd.obs.otel_setup")


def otel_modules() -> list[str]:
    return sorted(name for name in sys.modules
                  if name == "opentelemetry" or name.startswith("opentelemetry.") or name in OTEL_MODULES)


@gochatd.job(PROBE, max_attempts=1)
async def probe(ctx: JobContext) -> None:
    ctx.log.info("e2e_otel_modules", modules=otel_modules())
