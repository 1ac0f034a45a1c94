"""GET /metrics: valid Prometheus text with the documented families, queue depths that
agree with the store, and labels that never carry a job id or payload content."""

from __future__ import annotations

from collections.abc import Iterable

from prometheus_client.parser import text_string_to_metric_families
from prometheus_client.samples import Sample

from gochatd.worker.registry import HandlerSpec
from tests.admin.helpers import PARKED, Stack, admin_worker
from tests.integration.helpers import Tracker, make_registry, wait_for

MARKER = "zebra-PAYLOAD-7f3a9c"

REQUIRED = (
    "gochatd_jobs_finished_total", "gochatd_job_duration_seconds", "gochatd_claim_latency_seconds",
    "gochatd_queue_depth", "gochatd_queue_oldest_due_age_seconds", "gochatd_in_flight",
    "gochatd_stale_finishes_total", "gochatd_dispatch_mode", "gochatd_redis_errors_total",
    "gochatd_sweep_redispatched_total", "gochatd_leases_reaped_total",
    "gochatd_jobs_without_handler", "gochatd_stream_entries_without_handler_total",
)
#: The only label names the exporter may use; none of them can hold a job id or a payload.
LABEL_NAMES = {"queue", "job_type", "outcome", "state", "mode", "le",
               # the outbox: configured channel names and error classes (http_503, timeout)
               "channel", "error_class",
               # retention: the terminal status of the pruned jobs
               "status"}
STATES = ("queued", "delayed", "running", "retrying", "dead")


def samples(text: str) -> list[Sample]:
    out: list[Sample] = []
    for family in text_string_to_metric_families(text):
        out.extend(family.samples)
    return out


def value(found: Iterable[Sample], name: str, **labels: str) -> float:
    matches = [s.value for s in found if s.name == name and s.labels == labels]
    assert len(matches) == 1, (name, labels, matches)
    return float(matches[0])


async def test_metrics_parse_agree_with_the_store_and_leak_nothing(
    stack: Stack
) -> None:
    tracker = Tracker()
    registry = make_registry(HandlerSpec("test:block", tracker.blocking()))
    async with admin_worker(stack, registry=registry) as admin:
        client = admin.worker.client
        noop = [(await client.enqueue("sys:noop", {"note": MARKER, "n": i})).id for i in range(4)]
        parked = [(await client.enqueue("sys:noop", {"note": MARKER}, queue=PARKED)).id
                  for _ in range(3)]
        delayed = (await client.enqueue("sys:noop", {"note": MARKER}, queue=PARKED, delay_s=3600)).id
        failed = (await client.enqueue(
            "sys:fail", {"retryable": False, "message": f"boom {MARKER}"})).id
        # A job type nobody registered must not become a label value either. No daemon can
        # run it: it waits, counted per queue, never claimed (the later job is).
        unknown = (await client.enqueue(f"test:{MARKER}", {"note": MARKER})).id
        running = (await client.enqueue("test:block", {"note": MARKER})).id
        for job_id in noop:
            await admin.wait_job(job_id, "completed")
        await admin.wait_job(failed, "dead")
        await wait_for(lambda: running in tracker.blocked, what="handler running")
        await admin.wait_job(unknown, "queued")

        response = await admin.http.get("/metrics")
        assert response.status_code == 200
        assert response.headers["content-type"].startswith("text/plain")
        text = response.text
        assert MARKER not in text
        found = samples(text)
        families = {f.name for f in text_string_to_metric_families(text)}
        names = {s.name for s in found}
        for required in REQUIRED:
            assert required in names or required in families, required

        ids = {str(i) for i in [*noop, *parked, delayed, failed, unknown, running]}
        unknown_job = await admin.worker.store.get_job(unknown)
        assert unknown_job is not None and (unknown_job.attempts, unknown_job.fence) == (0, 0)
        job_types = set(registry.job_types()) | {"unregistered"}
        for sample in found:
            if not sample.name.startswith("gochatd_"):  # the default registry's (Python, process)
                assert MARKER not in str(sample.labels), sample
                continue
            assert set(sample.labels) <= LABEL_NAMES, sample
            for label, label_value in sample.labels.items():
                assert MARKER not in label_value, sample
                if label != "le":
                    assert label_value not in ids, sample
            if "job_type" in sample.labels:
                assert sample.labels["job_type"] in job_types, sample

        # Counters and histograms of this worker's own work.
        completed = {"queue": "default", "job_type": "sys:noop", "outcome": "completed"}
        assert value(found, "gochatd_jobs_finished_total", **completed) == 4
        assert not [s for s in found if s.labels.get("job_type") == "unregistered"]
        # Waiting jobs no live daemon can run: the unknown type in default, and the parked
        # queue's jobs, which no daemon serves (the delayed one is not due yet).
        assert value(found, "gochatd_jobs_without_handler", queue="default") == 1
        assert value(found, "gochatd_jobs_without_handler", queue=PARKED) == 3
        assert value(found, "gochatd_jobs_finished_total", queue="default",
                     job_type="sys:fail", outcome="dead") == 1
        assert value(found, "gochatd_job_duration_seconds_count", queue="default",
                     job_type="sys:noop") == 4
        assert value(found, "gochatd_claim_latency_seconds_count", queue="default") == 5
        assert value(found, "gochatd_in_flight") == 1
        for mode in ("streams", "polling", "starting", "stopped"):
            assert value(found, "gochatd_dispatch_mode", mode=mode) == (mode == stack.mode)
        for counter in ("gochatd_stale_finishes_total", "gochatd_redis_errors_total",
                        "gochatd_sweep_redispatched_total", "gochatd_leases_reaped_total"):
            assert value(found, counter) == 0

        # Queue depth: every (queue, state) the store reports, and nothing else.
        store_view = await admin.queues()
        depth = {(s.labels["queue"], s.labels["state"]): s.value
                 for s in found if s.name == "gochatd_queue_depth"}
        stats = {q.queue: q for q in await admin.worker.store.queue_stats()}
        assert set(depth) == {(q, state) for q in stats for state in STATES}
        for (queue, state), gauge in depth.items():
            assert gauge == store_view[queue][state], (queue, state)
        assert depth[(PARKED, "queued")] == 3 and depth[(PARKED, "delayed")] == 1
        assert depth[("default", "running")] == 1 and depth[("default", "dead")] == 1
        oldest = value(found, "gochatd_queue_oldest_due_age_seconds", queue=PARKED)
        assert 0 < oldest < 60

        tracker.release_all()
        await admin.wait_job(running, "completed")
        after = samples((await admin.http.get("/metrics")).text)
        assert value(after, "gochatd_in_flight") == 0
        assert value(after, "gochatd_queue_depth", queue="default", state="running") == 0
        assert value(after, "gochatd_job_duration_seconds_count", queue="default",
                     job_type="test:block") == 1
