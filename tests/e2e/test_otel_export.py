"""OpenTelemetry with the installed ``gochatd`` (docs/otel.md): without the extra its
process never imports opentelemetry; with ``gochatd[otel-otlp]`` and
``OTEL_TRACES_EXPORTER=otlp``, the command line's enqueue and the daemon's run reach an
OTLP/HTTP receiver on loopback as a producer span and its child consumer span."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

import pytest
from opentelemetry.proto.trace.v1.trace_pb2 import Span

from tests.support import daemon_process, installed
from tests.support.daemon_process import REPO_ROOT, DaemonFactory, poll_until, run_cli
from tests.support.otel_handlers import PROBE
from tests.support.otlp_receiver import ReceivedSpan, otlp_receiver

SECRET = "payload-secret-hunter2"
OTEL_VENV = REPO_ROOT / "build" / "installed-venv-otel"


@pytest.fixture(scope="session")
def otel_gochatd() -> Path:
    """``build/installed-venv-otel/bin/gochatd``: ``pip install '.[otel-otlp]'``."""
    return installed.build(OTEL_VENV, extras="otel-otlp")


def test_without_the_extra_a_daemon_imports_no_opentelemetry(
    tmp_path: Path, daemons: DaemonFactory
) -> None:
    lacks = subprocess.run([str(installed.python()), "-c", "import opentelemetry"],
                           capture_output=True, text=True, timeout=60, check=False)
    assert lacks.returncode == 1 and "ModuleNotFoundError" in lacks.stderr  # the plain install
    env = {"GOCHAT_DATABASE_URL": f"sqlite:///{tmp_path / 'jobs.db'}", "GOCHAT_LOG_FORMAT": "json",
           "OTEL_TRACES_EXPORTER": "none"}
    daemon = daemons.start("plain", ["--handlers", "tests.support.otel_handlers"], env=env,
                           cwd=tmp_path)
    done = run_cli(["enqueue", PROBE, "--traceparent",
                    "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01"], env, cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    job_id = json.loads(done.stdout)["id"]
    ran = daemon.wait_for_event("e2e_otel_modules", lambda e: e.get("job_id") == job_id)
    assert ran["modules"] == []
    daemon.wait_for_event("job_completed", lambda e: e.get("job_id") == job_id)
    assert daemon.stop() == 0
    daemon.assert_clean_output()


def test_the_extra_exports_enqueue_and_run_over_otlp_http(
    tmp_path: Path, daemons: DaemonFactory, otel_gochatd: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(daemon_process, "GOCHATD", str(otel_gochatd))
    with otlp_receiver() as receiver:
        env = {"GOCHAT_DATABASE_URL": f"sqlite:///{tmp_path / 'jobs.db'}",
               "GOCHAT_LOG_FORMAT": "json", "OTEL_TRACES_EXPORTER": "otlp",
               "OTEL_EXPORTER_OTLP_TRACES_ENDPOINT": receiver.endpoint,
               "OTEL_BSP_SCHEDULE_DELAY": "100"}
        daemon = daemons.start("traced", ["--handlers", "tests.support.otel_handlers"], env=env,
                               cwd=tmp_path)
        done = run_cli(["enqueue", PROBE, "--queue", "high", "--payload",
                        json.dumps({"token": SECRET})], {**env, "OTEL_SERVICE_NAME": "producer"},
                       cwd=tmp_path)
        assert done.returncode == 0, done.stderr
        job = json.loads(done.stdout)
        ran = daemon.wait_for_event("e2e_otel_modules", lambda e: e.get("job_id") == job["id"])
        assert "gochatd.obs.otel_spans" in ran["modules"]  # the extra is in use

        def both() -> tuple[ReceivedSpan, ReceivedSpan] | None:
            spans = receiver.snapshot()
            producers = [s for s in spans if s.kind == Span.SPAN_KIND_PRODUCER]
            consumers = [s for s in spans if s.kind == Span.SPAN_KIND_CONSUMER]
            return (producers[0], consumers[0]) if producers and consumers else None

        found = poll_until(both, timeout_s=20.0, what="a producer and a consumer span over OTLP")
        assert found is not None
        producer, consumer = found
        assert daemon.stop() == 0
        raw = receiver.raw()
    # The CLI's enqueue is the parent of the daemon's run, across processes, via the row.
    assert (producer.service, producer.name) == ("producer", "enqueue high")
    assert (consumer.service, consumer.name) == ("gochatd", "run high")
    assert consumer.trace_id == producer.trace_id
    assert consumer.parent_span_id == producer.span_id
    assert job["traceparent"] == f"00-{producer.trace_id}-{producer.span_id}-{job['traceparent'][-2:]}"
    assert producer.attributes["messaging.message.id"] == consumer.attributes["messaging.message.id"] \
        == str(job["id"])
    assert consumer.attributes["messaging.system"] == "gochatd"
    assert consumer.attributes["messaging.destination.name"] == "high"
    assert consumer.attributes["gochatd.job.outcome"] == "completed"
    assert SECRET.encode() not in raw  # no payload in any exported byte
    daemon.assert_clean_output()


def test_an_exporter_it_cannot_honour_is_one_line_and_exit_2(tmp_path: Path) -> None:
    env = {"GOCHAT_DATABASE_URL": f"sqlite:///{tmp_path / 'jobs.db'}", "OTEL_TRACES_EXPORTER": "otlp"}
    plain = run_cli(["enqueue", "sys:noop"], env, cwd=tmp_path)  # the install without the extra
    assert plain.returncode == 2
    assert plain.stderr.count("\n") == 1 and "pip install 'gochatd[otel-otlp]'" in plain.stderr
    zipkin = run_cli(["enqueue", "sys:noop"], {**env, "OTEL_TRACES_EXPORTER": "zipkin"}, cwd=tmp_path)
    assert zipkin.returncode == 2 and zipkin.stderr.count("\n") == 1
    assert "OTEL_TRACES_EXPORTER" in zipkin.stderr
