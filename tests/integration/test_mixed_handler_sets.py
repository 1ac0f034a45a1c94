"""In-process: two streams workers with different handlers on one database and one Redis
(docs/job-types.md, "A type no daemon can run"). Each job runs once, on the worker that has
its handler, whichever worker its stream entry reached; the sweep is out of reach, so a job
whose entry the other worker acked starts through the capable worker's backlog claim."""

from __future__ import annotations

from gochatd.model import JobStatus
from gochatd.worker.registry import HandlerSpec
from tests.integration.helpers import (
    Tracker,
    make_registry,
    started_worker,
    wait_all_status,
    wait_for,
)
from tests.support.harness import make_settings

JOBS = 20


async def test_each_job_runs_on_the_worker_with_its_handler(
    backend_url: str, redis_url: str
) -> None:
    ran_a, ran_b = Tracker(), Tracker()
    settings = make_settings(backend_url, redis_url, worker_redis_sweep_interval_s=600.0)
    async with started_worker(
        settings, registry=make_registry(HandlerSpec("mix:a", ran_a.counting()))
    ) as a, started_worker(
        settings, registry=make_registry(HandlerSpec("mix:b", ran_b.counting()))
    ) as b:
        assert a.worker.mode.value == b.worker.mode.value == "streams"
        await wait_for(lambda: a.worker.fleet.lacking_peers() and b.worker.fleet.lacking_peers(),
                       timeout_s=15, what="each worker sees the other lacks its type")
        ids = {"mix:a": [], "mix:b": []}  # type: dict[str, list[int]]
        # One type after the other, not a, b, a, b: an entry that arrives while both
        # workers block in XREADGROUP goes to the one that blocked first, so entries that
        # alternate could each reach the worker with its handler (CI saw no refusal).
        # Entries of one type in a row reach both workers in turn.
        for job_type in ids:
            for i in range(JOBS):
                ids[job_type].append((await a.worker.client.enqueue(job_type, {"n": i})).id)
        jobs = await wait_all_status(a.worker.store, ids["mix:a"] + ids["mix:b"],
                                     JobStatus.COMPLETED, timeout_s=60)
        # The capable worker's backlog claim may run a job before any worker reads its
        # entry; the entries are read all the same: wait for one read by the other worker.
        await wait_for(
            lambda: sum(w.worker.counters["stream_entries_without_handler"] for w in (a, b)),
            timeout_s=30, what="an entry read by the worker without its handler")
        refused = sum(w.worker.counters["stream_entries_without_handler"] for w in (a, b))

    assert sorted(ran_a.executions) == sorted(ids["mix:a"])
    assert sorted(ran_b.executions) == sorted(ids["mix:b"])
    assert set(ran_a.executions.values()) | set(ran_b.executions.values()) == {1}
    assert all(j.attempts == 1 and j.fence == 1 for j in jobs.values())
    assert {jobs[i].locked_by for i in ids["mix:a"]} == {a.worker.worker_id}
    assert {jobs[i].locked_by for i in ids["mix:b"]} == {b.worker.worker_id}
    assert refused >= 1  # some entries did reach the worker without the handler
