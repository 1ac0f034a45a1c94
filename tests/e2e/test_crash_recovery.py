"""PostgreSQL + Redis daemons that are killed, stopped under load, and replaced: no job is
lost, none is finished twice, and a fence is never reused."""

from __future__ import annotations

import signal
import time
from collections import Counter, defaultdict

from tests.support.daemon_process import DaemonFactory, DaemonProcess, poll_until
from tests.support.e2e_jobs import (
    Execution,
    enqueue_many,
    executions,
    jobs,
    query,
    status_counts,
)

HANDLERS = "tests.support.recording_handlers"


def _env(pg_url: str, redis_url: str, **extra: str) -> dict[str, str]:
    return {
        "GOCHAT_DATABASE_URL": pg_url,
        "GOCHAT_REDIS_URL": redis_url,
        "GOCHAT_HANDLERS": HANDLERS,
        "GOCHAT_LOG_FORMAT": "json",
        "GOCHAT_WORKER_LEASE_S": "2",
        "GOCHAT_WORKER_REAP_INTERVAL_S": "0.2",
        "GOCHAT_WORKER_REDIS_BLOCK_TIMEOUT_S": "0.2",
        "GOCHAT_WORKER_POLL_INTERVAL_MAX_S": "0.2",
        "GOCHAT_WORKER_RETRY_BASE_S": "0.05",
        "GOCHAT_WORKER_RETRY_CAP_S": "0.2",
        **extra,
    }


def _job_status(pg_url: str, job_id: int) -> str:
    return str(query(pg_url, "SELECT status FROM background_jobs WHERE id = %s", [job_id])[0][0])


def _stop_clean(*daemons: DaemonProcess) -> None:
    for d in daemons:
        d.send(signal.SIGTERM)
    for d in daemons:
        assert d.wait(20) == 0, d.output()[-4000:]
        d.assert_clean_output()


def test_kill_9_mid_handler_job_runs_again_elsewhere(
    pg_jobs: str, redis_url: str, daemons: DaemonFactory
) -> None:
    env = _env(pg_jobs, redis_url)
    a = daemons.start("a", env=env, mode="streams")
    [job_id] = enqueue_many(
        pg_jobs, "test:record", [{"seconds_by_fence": {"1": 30}, "seconds": 0.05}], redis_url
    )
    poll_until(lambda: _job_status(pg_jobs, job_id) == "running" and executions(pg_jobs),
               timeout_s=20, what="the job running on daemon A")
    [first] = executions(pg_jobs)
    assert (first.job_id, first.fence, first.pid, first.ended_at) == (job_id, 1, a.pid, None)

    a.kill9()
    killed_at = time.monotonic()
    b = daemons.start("b", env=env, mode="streams")
    poll_until(lambda: _job_status(pg_jobs, job_id) == "completed", timeout_s=30,
               what="the job completed on daemon B")
    recovered_in = time.monotonic() - killed_at
    assert recovered_in < 15, f"recovery took {recovered_in:.1f}s with a 2 s lease"

    runs = executions(pg_jobs)
    assert [(e.fence, e.pid) for e in runs] == [(1, a.pid), (2, b.pid)]
    assert runs[0].ended_at is None  # killed mid-sleep
    assert runs[1].ended_at is not None
    assert runs[1].attempt == 2
    job = jobs(pg_jobs)[job_id]
    assert (job.status, job.fence, job.attempts) == ("completed", 2, 2)
    _stop_clean(b)


def test_sigterm_under_load_finishes_in_flight_and_keeps_the_rest(
    pg_jobs: str, redis_url: str, daemons: DaemonFactory
) -> None:
    env = _env(pg_jobs, redis_url, GOCHAT_WORKER_CONCURRENCY="10",
               GOCHAT_WORKER_SHUTDOWN_GRACE_S="10")
    a = daemons.start("a", env=env, mode="streams")
    ids = enqueue_many(pg_jobs, "test:record", [{"seconds": 0.3} for _ in range(50)], redis_url)
    poll_until(lambda: len(executions(pg_jobs)) >= 10, timeout_s=20, what="10 handlers started")

    a.send(signal.SIGTERM)
    assert a.wait(20) == 0
    a.assert_clean_output()
    draining = a.events("worker_draining")
    assert len(draining) == 1 and draining[0]["in_flight"] > 0

    runs = executions(pg_jobs)
    rows = jobs(pg_jobs)
    assert set(rows) == set(ids)
    assert all(e.ended_at is not None for e in runs), "an in-flight handler was cut short"
    ran = {e.job_id for e in runs}
    assert len(ran) == len(runs), "a job ran twice"
    assert all(rows[j].status == "completed" for j in ran)
    assert status_counts(pg_jobs)["running"] == 0
    rest = [rows[j] for j in ids if j not in ran]
    assert rest, "every job finished before the SIGTERM: the test did not stop under load"
    assert all(r.status in ("queued", "retrying") for r in rest), Counter(r.status for r in rest)
    assert all(r.attempts == 0 for r in rest), "an unstarted job was charged an attempt"

    b = daemons.start("b", env=env, mode="streams")
    poll_until(lambda: status_counts(pg_jobs)["completed"] == 50, timeout_s=30,
               what="daemon B drained the rest")
    runs = executions(pg_jobs)
    assert sorted(e.job_id for e in runs) == sorted(ids)  # each exactly once
    assert {e.pid for e in runs if e.job_id not in ran} == {b.pid}
    assert all(e.ended_at is not None for e in runs)
    _stop_clean(b)


def _check_fencing(final: dict[int, int], runs: list[Execution], killed_pids: set[int]) -> None:
    """``final``: job id -> the job's final fence (all completed)."""
    per_fence = Counter((e.job_id, e.fence) for e in runs)
    reused = {k: n for k, n in per_fence.items() if n > 1}
    assert not reused, f"fences executed more than once: {reused}"
    by_job: dict[int, list[Execution]] = defaultdict(list)
    for e in runs:
        by_job[e.job_id].append(e)
    for job_id, fence in final.items():
        ended = [e for e in by_job[job_id] if e.ended_at is not None]
        winners = [e for e in ended if e.fence == fence]
        assert len(winners) == 1, f"job {job_id}: final fence {fence}, executions {by_job[job_id]}"
        for e in ended:
            if e.fence != fence:
                # Only a killed daemon may have finished a handler whose result it never
                # committed (killed between the handler's end and the fenced write).
                assert e.fence < fence and e.pid in killed_pids, (job_id, fence, e)
        for e in by_job[job_id]:
            assert e.fence <= fence, (job_id, fence, e)
            if e.ended_at is None:
                assert e.pid in killed_pids, f"job {job_id}: unfinished run {e}"


def test_two_daemons_one_killed_every_job_completes_once_per_fence(
    pg_jobs: str, redis_url: str, daemons: DaemonFactory
) -> None:
    # A 3 s lease: a loaded CI machine must not lose leases of live daemons.
    env = _env(pg_jobs, redis_url, GOCHAT_WORKER_CONCURRENCY="10", GOCHAT_WORKER_LEASE_S="3")
    a = daemons.start("a", env=env, mode="streams")
    b = daemons.start("b", env=env, mode="streams")
    total = 300
    ids = enqueue_many(pg_jobs, "test:record", [{"seconds": 0.05} for _ in range(total)],
                       redis_url)

    def midway_with_a_busy() -> bool:
        done = status_counts(pg_jobs)["completed"]
        busy = query(
            pg_jobs,
            "SELECT count(*) FROM test_executions WHERE pid = %s AND ended_at IS NULL",
            [a.pid],
        )[0][0]
        return done >= total // 3 and busy > 0

    poll_until(midway_with_a_busy, timeout_s=60, interval_s=0.02,
               what="a third done while daemon A runs handlers")
    a.kill9()
    assert status_counts(pg_jobs)["completed"] < total, "all done before the kill"
    c = daemons.start("c", env=env, mode="streams")

    started = time.monotonic()
    poll_until(lambda: status_counts(pg_jobs)["completed"] == total, timeout_s=60,
               interval_s=0.1, what=f"all {total} jobs completed")
    assert time.monotonic() - started < 45

    rows = jobs(pg_jobs)
    assert set(rows) == set(ids)
    assert all(r.status == "completed" for r in rows.values())
    runs = executions(pg_jobs)
    _check_fencing({r.id: r.fence for r in rows.values()}, runs, {a.pid})
    assert any(e.pid == a.pid and e.ended_at is None for e in runs), "A was killed mid-handler"
    recovered = [r for r in rows.values() if r.fence > 1]
    assert recovered, "no job of the killed daemon was re-run"
    pids = Counter(e.pid for e in runs)
    assert pids[a.pid] > 0 and pids[b.pid] > 0
    _stop_clean(b, c)
