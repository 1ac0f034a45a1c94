"""The command line's SDK from ``OTEL_*`` (docs/otel.md), in processes of their own (a
tracer provider is set once per process): ``console`` writes the enqueue's span to stderr
at exit; a provider set before gochatd's (``opentelemetry-instrument``) is left in place."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
from pathlib import Path

ENQUEUE = textwrap.dedent("""
    import sys, trio
    from gochatd.cli.program import main
    from gochatd.testing import migrate

    trio.run(migrate, sys.argv[1])
    sys.exit(main(["enqueue", "sys:noop", "--database-url", sys.argv[1], "--queue", "high",
                   "--payload", '{"token": "hunter2-secret"}']))
""")

SET_BEFORE = textwrap.dedent("""
    from opentelemetry import trace
    from opentelemetry.sdk.trace import TracerProvider
    from gochatd.obs.otel import exporting_from_env

    mine = TracerProvider()
    trace.set_tracer_provider(mine)
    with exporting_from_env():
        assert trace.get_tracer_provider() is mine
    print("kept")
""")


def _run(code: str, *args: str, **env: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-c", code, *args], capture_output=True, text=True,
                          timeout=120, check=False, env={**os.environ, **env})


def test_console_writes_the_enqueue_span_to_stderr_at_exit(tmp_path: Path) -> None:
    done = _run(ENQUEUE, f"sqlite:///{tmp_path / 'jobs.db'}", OTEL_TRACES_EXPORTER="console",
                OTEL_SERVICE_NAME="cli-test")
    assert done.returncode == 0, done.stderr
    job = json.loads(done.stdout)
    assert '"name": "enqueue high"' in done.stderr and '"kind": "SpanKind.PRODUCER"' in done.stderr
    assert f'"messaging.message.id": "{job["id"]}"' in done.stderr
    assert '"service.name": "cli-test"' in done.stderr
    assert job["traceparent"].split("-")[1] in done.stderr.replace("0x", "")  # the row carries it
    assert "hunter2-secret" not in done.stderr


def test_a_provider_set_before_is_left_in_place() -> None:
    done = _run(SET_BEFORE, OTEL_TRACES_EXPORTER="otlp")
    assert done.returncode == 0, done.stderr
    assert done.stdout == "kept\n" and "Overriding" not in done.stderr
