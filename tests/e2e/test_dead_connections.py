"""Connections that died idle (``pg_terminate_backend`` on every backend of a daemon, as a
PostgreSQL restart or a pooler would; ``CLIENT KILL`` on its Redis connections) are replaced
before use: no claim, finish or poll
fails for them, and every job enqueued afterwards completes. Meanwhile the log stays JSON:
every stderr line is one JSON object, the libraries' records included, and the database
password appears nowhere."""

from __future__ import annotations

import json
from collections.abc import Sequence

import psycopg
import pytest
import redis as redis_lib
import trio

from gochatd.client.client import Client
from tests.support.daemon_process import DaemonFactory, DaemonProcess, poll_until
from tests.support.e2e_jobs import status_counts

PASSWORD = "s3cret-pw-9f2"  # trust authentication accepts it; it must never be printed
JOBS = 30


def with_password(url: str) -> str:
    scheme, _, rest = url.partition("://")
    user, _, host = rest.partition("@")
    return f"{scheme}://{user}:{PASSWORD}@{host}"


def daemon_backends(url: str) -> set[int]:
    with psycopg.connect(url, autocommit=True) as conn:
        rows = conn.execute(
            "SELECT pid FROM pg_stat_activity WHERE datname = current_database() "
            "AND pid <> pg_backend_pid() AND backend_type = 'client backend'").fetchall()
    return {int(r[0]) for r in rows}


def terminate_while_idle(url: str, pids: set[int]) -> None:
    """Terminate each backend while it sits idle in the pool: idle for 100 ms at least, so
    not between two statements of one unit of work (a connection killed while in use fails
    that unit, which is not what is tested here); wait until every one is gone."""

    def round_() -> bool:
        with psycopg.connect(url, autocommit=True) as conn:
            conn.execute(
                "SELECT pg_terminate_backend(pid, 10000) FROM pg_stat_activity "
                "WHERE pid = ANY(%s) AND state = 'idle' "
                "AND state_change < clock_timestamp() - interval '100 milliseconds'",
                (list(pids),))
            left = conn.execute("SELECT count(*) FROM pg_stat_activity WHERE pid = ANY(%s)",
                                (list(pids),)).fetchone()
        return left is not None and left[0] == 0

    poll_until(round_, timeout_s=30, what="the daemon's backends terminated")


def enqueue(url: str, redis_url: str, job_types: Sequence[str]) -> None:
    async def run() -> None:
        async with Client(url, redis_url or None) as client:
            for job_type in job_types:
                await client.enqueue(job_type, {})

    trio.run(run)


def failures(daemon: DaemonProcess) -> list[str]:
    """Events of a failed store or Redis call, besides the LISTEN connection's own
    reconnect (its loss must be reported: notifications may have been missed)."""
    return [str(e["event"]) for e in daemon.events()
            if (str(e["event"]).endswith("_failed") or e["event"] == "finish_retrying")
            and e["event"] != "listen_failed"]


@pytest.mark.slow
@pytest.mark.parametrize("dispatch", ["polling", "streams"])
def test_a_daemon_whose_backends_were_terminated_fails_nothing(
    dispatch: str, pg_jobs: str, redis_url: str, daemons: DaemonFactory
) -> None:
    url = with_password(pg_jobs)
    redis = redis_url if dispatch == "streams" else ""
    env = {"GOCHAT_DATABASE_URL": url, "GOCHAT_REDIS_URL": redis, "GOCHAT_LOG_FORMAT": "json",
           "GOCHAT_HANDLERS": "tests.support.library_log_handlers",
           # An idle poller waits up to 2 s between polls, so its connection sits idle.
           "GOCHAT_WORKER_POLL_INTERVAL_MAX_S": "2"}
    daemon = daemons.start("worker", ["--worker-only"], env, mode=dispatch)
    enqueue(url, redis, ["sys:noop"] * 3)  # every kind of unit has run once
    poll_until(lambda: status_counts(pg_jobs) == {"completed": 3}, timeout_s=30,
               what="the first jobs completed")
    backends = daemon_backends(pg_jobs)
    assert len(backends) >= 2, backends  # the pool and the LISTEN connection
    terminate_while_idle(pg_jobs, backends)
    if redis:  # and every Redis connection of the daemon's (a Redis restart, a proxy)
        with redis_lib.Redis.from_url(redis) as admin:
            assert int(admin.client_kill_filter(_type="normal", skipme=True)) >= 2

    enqueue(url, redis, ["sys:noop"] * JOBS + ["test:library_log"])
    poll_until(lambda: status_counts(pg_jobs) == {"completed": JOBS + 4}, timeout_s=60,
               what="every job enqueued after the kill completed")
    assert failures(daemon) == [], daemon.output()
    assert daemon.stop(60) == 0, daemon.output()

    log = daemon.log_text()
    assert PASSWORD not in log + daemon.out_text()
    lines = log.splitlines()
    for line in lines:
        assert isinstance(json.loads(line), dict), line
    library = [json.loads(line) for line in lines if '"library_log"' in line]
    assert {(e["logger"], e["level"]) for e in library} == {
        ("psycopg.pool", "warning"), ("py.warnings", "warning")}, library
    [pool_line] = [e for e in library if e["logger"] == "psycopg.pool"]
    assert pool_line["message"].startswith("discarding closed connection: ")
    assert ":***@" in pool_line["message"]
    daemon.assert_clean_output()
