"""gochatd with ``database_url`` on a real pgbouncer in transaction mode: the CLI upgrades a
fresh database through it, a client and the CLI enqueue through it, a daemon claims and
finishes through it (LISTEN on a direct ``database_listen_url``, or polling without one),
with Redis and without; every job runs exactly once and SIGTERM exits 0."""

from __future__ import annotations

import json
import signal
from pathlib import Path
from urllib.parse import urlsplit, urlunsplit

import pytest

from tests.support.daemon_process import DaemonFactory, assert_clean, poll_until, run_cli
from tests.support.e2e_jobs import enqueue_many, executions, jobs, reset_executions
from tests.support.pgbouncer import PgBouncer

HANDLERS = "tests.support.recording_handlers"


def _same_server_other_db(url: str, dbname: str) -> str:
    parts = urlsplit(url)
    return urlunsplit(parts._replace(path=f"/{dbname}"))


@pytest.mark.slow
@pytest.mark.parametrize(("with_redis", "with_listen_url"), [(True, True), (False, False)],
                         ids=["redis+listen_url", "polling"])
def test_daemon_clients_and_cli_through_pgbouncer(
    tmp_path: Path, daemons: DaemonFactory, pgbouncer: PgBouncer, fresh_pg_url: str,
    redis_url: str, with_redis: bool, with_listen_url: bool,
) -> None:
    direct = fresh_pg_url
    pooled = _same_server_other_db(pgbouncer.url, urlsplit(direct).path.lstrip("/"))
    env = {"GOCHAT_DATABASE_URL": pooled, "RECORDING_DATABASE_URL": direct,
           "GOCHAT_REDIS_URL": redis_url if with_redis else "",
           "GOCHAT_DATABASE_LISTEN_URL": direct if with_listen_url else ""}

    upgraded = run_cli(["db", "upgrade"], env)
    assert upgraded.returncode == 0, upgraded.stderr
    assert upgraded.stdout.startswith("applied: 0001_"), upgraded.stdout
    again = run_cli(["db", "upgrade"], env)
    assert (again.returncode, again.stdout.strip()) == (0, "schema is up to date")
    reset_executions(direct)

    daemon = daemons.start("pooled", ["--handlers", HANDLERS], env=env,
                           mode="streams" if with_redis else "polling")
    notifications_off = daemon.events("notifications_off")
    assert len(notifications_off) == (0 if with_listen_url else 1)

    cli_ids = []
    for extra in ([], ["--delay", "0.5"], ["--queue", "high", "--priority", "3"]):
        made = run_cli(["enqueue", "test:record", *extra], env)
        assert made.returncode == 0, made.stderr
        cli_ids.append(int(json.loads(made.stdout)["id"]))
    client_ids = enqueue_many(pooled, "test:record", [{"n": n} for n in range(200)],
                              redis_url if with_redis else "")
    wanted = set(cli_ids) | set(client_ids)
    assert len(wanted) == 203

    def all_completed() -> bool:
        rows = jobs(direct)
        return set(rows) == wanted and all(r.status == "completed" for r in rows.values())

    poll_until(all_completed, timeout_s=90, interval_s=0.2, what="203 jobs completed")
    listed = run_cli(["jobs", "list", "--status", "completed", "--json", "--limit", "1000"], env)
    assert listed.returncode == 0, listed.stderr
    assert {j["id"] for j in json.loads(listed.stdout)} == wanted

    runs = executions(direct)
    assert sorted(r.job_id for r in runs) == sorted(wanted), "a job ran twice or never"
    assert all(r.ended_at is not None and r.fence == 1 for r in runs)
    assert all((r.attempts, r.fence) == (1, 1) for r in jobs(direct).values())

    replies = run_cli(["outbox", "list", "--json"], env)
    assert (replies.returncode, json.loads(replies.stdout)) == (0, []), replies.stderr
    # Retention through the pooler: every finished job is old enough at 1 ms.
    pruned = run_cli(["jobs", "prune"], {**env, "GOCHAT_RETENTION_COMPLETED_S": "0.001"})
    assert pruned.returncode == 0, pruned.stderr
    assert json.loads(pruned.stdout)["completed"] == 203
    assert jobs(direct) == {}

    daemon.send(signal.SIGTERM)
    assert daemon.wait(30) == 0
    daemon.assert_clean_output()
    # Prepared statements were never tried: the pooler was seen when the store opened.
    assert daemon.events("prepared_statements_off") == []
    assert_clean(upgraded.stderr + again.stderr + listed.stderr + pruned.stderr, "cli")


@pytest.mark.slow
def test_migrate_copies_and_validates_through_pgbouncer(
    tmp_path: Path, pgbouncer: PgBouncer, fresh_pg_url: str
) -> None:
    """``gochatd migrate`` (its own connections, not the store's) with the destination
    behind the pooler: batches of the same statement, a consistent read, validation."""
    source = f"sqlite:///{tmp_path / 'home.db'}"
    ids = enqueue_many(source, "sys:noop", [{"n": n} for n in range(1200)])
    pooled = _same_server_other_db(pgbouncer.url, urlsplit(fresh_pg_url).path.lstrip("/"))
    scope = ["--from", source, "--to", pooled, "--all"]
    copied = run_cli(["migrate", "copy", *scope, "--migrate-destination",
                      "--batch-size", "100"], timeout_s=120)
    assert copied.returncode == 0, copied.stderr
    checked = run_cli(["migrate", "validate", *scope], timeout_s=120)
    assert checked.returncode == 0, checked.stderr
    assert "equal" in checked.stdout and "DIFFERENT" not in checked.stdout
    assert set(jobs(fresh_pg_url)) == set(ids)
    assert_clean(copied.stderr + checked.stderr, "migrate")
