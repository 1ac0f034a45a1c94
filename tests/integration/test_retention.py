"""Retention in a running daemon: the loop deletes old finished jobs in batches and counts
them in gochatd_jobs_pruned_total; ``gochatd jobs prune [--dry-run]`` does one pass."""

from __future__ import annotations

import json

import trio

from gochatd.model import JobStatus
from tests.integration.helpers import (
    insert_job,
    make_registry,
    migrate,
    now_sql,
    sql,
    started_worker,
)
from tests.support.daemon_process import run_cli
from tests.support.harness import make_settings
from tests.support.wait import wait_until

DAY_S = 86400.0


async def _finished_row(url: str, status: JobStatus, age_s: float) -> int:
    """A finished row whose last change was ``age_s`` ago (database clock)."""
    job_id = await insert_job(url, "sys:noop")
    await sql(url, f"UPDATE background_jobs SET status = %s, updated_at = {now_sql(url, -age_s)} "
              "WHERE id = %s", [status.value, job_id])
    return job_id


async def _ids(url: str) -> set[int]:
    return {int(r[0]) for r in await sql(url, "SELECT id FROM background_jobs")}


async def test_the_daemon_prunes_old_finished_jobs(backend_url: str) -> None:
    await migrate(backend_url)
    old_done = [await _finished_row(backend_url, JobStatus.COMPLETED, 2 * DAY_S)
                for _ in range(23)]
    new_done = [await _finished_row(backend_url, JobStatus.COMPLETED, 0.5 * DAY_S)
                for _ in range(3)]
    old_cancelled = [await _finished_row(backend_url, JobStatus.CANCELLED, 2 * DAY_S)]
    old_dead = [await _finished_row(backend_url, JobStatus.DEAD, 400 * DAY_S)]
    settings = make_settings(
        backend_url, retention_completed_s=DAY_S, retention_cancelled_s=DAY_S,
        retention_dead_s=0, retention_batch=5, retention_interval_s=0.1,
    )
    async with started_worker(settings, registry=make_registry()) as run:
        # Jobs that run now finish recently, so they are kept.
        fresh = await run.worker.client.enqueue_many([{"job_type": "sys:noop"}] * 4)

        async def only_kept() -> bool:
            return await _ids(backend_url) == (
                set(new_done) | set(old_dead) | {r.job.id for r in fresh}
            )

        await wait_until(only_kept, what="old completed and cancelled jobs pruned")
        registry = run.worker.metrics.registry

        def pruned(status: str) -> float | None:
            return registry.get_sample_value("gochatd_jobs_pruned_total", {"status": status})

        assert pruned("completed") == len(old_done)
        assert pruned("cancelled") == len(old_cancelled)
        assert pruned("dead") is None, "retention.dead_s: 0 keeps dead jobs"


async def test_cli_prune_dry_run_then_prune(backend_url: str) -> None:
    env = {"GOCHAT_DATABASE_URL": backend_url, "GOCHAT_RETENTION_COMPLETED_S": "3600",
           "GOCHAT_RETENTION_DEAD_S": "0"}
    migrated = await trio.to_thread.run_sync(lambda: run_cli(["db", "upgrade"], env))
    assert migrated.returncode == 0, migrated.stderr
    old = [await _finished_row(backend_url, JobStatus.COMPLETED, 7200) for _ in range(3)]
    kept = [await _finished_row(backend_url, JobStatus.COMPLETED, 60),
            await _finished_row(backend_url, JobStatus.DEAD, 10 * DAY_S)]

    dry = await trio.to_thread.run_sync(lambda: run_cli(["jobs", "prune", "--dry-run"], env))
    assert dry.returncode == 0, dry.stderr
    assert json.loads(dry.stdout) == {"dry_run": True, "completed": 3, "cancelled": 0}
    assert await _ids(backend_url) == set(old) | set(kept)

    done = await trio.to_thread.run_sync(lambda: run_cli(["jobs", "prune"], env))
    assert done.returncode == 0, done.stderr
    assert json.loads(done.stdout) == {"dry_run": False, "completed": 3, "cancelled": 0}
    assert await _ids(backend_url) == set(kept)

    bad = await trio.to_thread.run_sync(
        lambda: run_cli(["jobs", "prune"], {**env, "GOCHAT_RETENTION_BATCH": "0"})
    )
    assert bad.returncode == 2 and "retention.batch" in bad.stderr
    assert len(bad.stderr.splitlines()) == 1
