"""worker.queue_rates with the installed ``gochatd``: two daemons on PostgreSQL, one given
the rate by ``GOCHAT_WORKER_QUEUE_RATES``, the other by its config file. The jobs of the
rate-limited queue that start in any second (their attempts' started_at, the database
clock) never number more than the rate; /v1/queues shows it; SIGHUP with a new rate in the
file applies it without a restart."""

from __future__ import annotations

import math
import os
import signal
from collections import Counter
from pathlib import Path

import httpx
import trio
import yaml

from gochatd import Client
from tests.support.daemon_process import DaemonFactory, DaemonProcess, poll_until
from tests.support.e2e_jobs import query

QUEUE = "provider"


def _enqueue(url: str, n: int, tag: str) -> list[int]:
    async def run() -> list[int]:
        async with Client(url) as client:
            results = await client.enqueue_many(
                [{"job_type": "sys:noop", "payload": {tag: i}, "queue": QUEUE} for i in range(n)])
            return [r.job.id for r in results]

    return trio.run(run)


def _starts_per_second(url: str, ids: list[int]) -> Counter[int]:
    # A completed run's start is its job's claim time (a success writes no job_attempts row:
    # docs/operations.md, "A job's attempts").
    rows = query(url, "SELECT id, extract(epoch FROM locked_at)::float8 FROM background_jobs"
                      " WHERE id = ANY(%s) AND status = 'completed' AND attempts = 1", [ids])
    assert sorted(r[0] for r in rows) == sorted(ids)  # one attempt each
    return Counter(math.floor(r[1]) for r in rows)


def _completed(url: str, ids: list[int]) -> bool:
    rows = query(url, "SELECT count(*) FROM background_jobs WHERE id = ANY(%s)"
                      " AND status = 'completed'", [ids])
    return rows[0][0] == len(ids)


def _queue_rate(daemon: DaemonProcess) -> object:
    address = str(daemon.wait_for_event("admin_listening")["address"])
    queues = httpx.get(f"{address}/v1/queues", timeout=10, trust_env=False).json()["queues"]
    return next(q["rate"] for q in queues if q["queue"] == QUEUE)


def _write_yaml(path: Path, doc: dict[str, object]) -> None:
    tmp = path.with_suffix(".tmp")
    tmp.write_text(yaml.safe_dump(doc), encoding="utf-8")
    os.replace(tmp, path)


def test_env_rate_and_sighup_reload(pg_jobs: str, tmp_path: Path, daemons: DaemonFactory) -> None:
    env = {"GOCHAT_DATABASE_URL": pg_jobs, "GOCHAT_WORKER_QUEUES": f"{QUEUE}=1,default=1",
           "GOCHAT_LOG_FORMAT": "json"}
    by_env = daemons.start("by-env", env={**env, "GOCHAT_WORKER_QUEUE_RATES": f"{QUEUE}=3/s"},
                           cwd=tmp_path, mode="polling")
    config = tmp_path / "gochatd.yaml"
    doc: dict[str, object] = {"worker": {"queue_rates": {QUEUE: "3/s"}}}
    _write_yaml(config, doc)
    by_file = daemons.start("by-file", ["--config", str(config)], env=env, cwd=tmp_path,
                            mode="polling")
    assert _queue_rate(by_env) == "3/s"

    first = _enqueue(pg_jobs, 12, "first")
    poll_until(lambda: _completed(pg_jobs, first), timeout_s=30, what="the first jobs")
    before = _starts_per_second(pg_jobs, first)
    assert max(before.values()) == 3, before

    by_env.stop()
    doc["worker"] = {"queue_rates": {QUEUE: "6/s"}}
    _write_yaml(config, doc)
    by_file.send(signal.SIGHUP)
    reloaded = by_file.wait_for_event("config_reloaded")
    assert "worker.queue_rates" in reloaded["changed"]
    assert _queue_rate(by_file) == "6/s"
    second = _enqueue(pg_jobs, 18, "second")
    poll_until(lambda: _completed(pg_jobs, second), timeout_s=30, what="the second jobs")
    after = _starts_per_second(pg_jobs, second)
    assert max(after.values()) == 6, after
    assert by_file.alive()
