"""Issue 7's "done when", tried as a new user would from the README's "Outgrowing SQLite":
the Quickstart daemon runs on ./gochatd.db, a producer keeps enqueuing, and the README's
one command moves everything to PostgreSQL with jobs flowing the whole time."""

from __future__ import annotations

import json
import threading
from pathlib import Path

from tests.support.daemon_process import DaemonFactory, poll_until, run_cli
from tests.support.e2e_jobs import enqueue_many, query


def test_a_running_sqlite_deployment_moves_to_postgres(
    tmp_path: Path, daemons: DaemonFactory, fresh_pg_url: str
) -> None:
    env = {"GOCHAT_DATABASE_URL": "sqlite:///gochatd.db"}  # the Quickstart's default file
    daemon = daemons.start("sqlite-home", env=env, cwd=tmp_path, mode="polling")
    db_url = f"sqlite:///{tmp_path / 'gochatd.db'}"
    ids: list[int] = []
    stop = threading.Event()

    def produce() -> None:  # a producer that never stops for the move
        n = 0
        while not stop.is_set():
            ids.extend(enqueue_many(db_url, "sys:noop", [{"n": n + i} for i in range(10)]))
            n += 10

    producer = threading.Thread(target=produce)
    producer.start()
    try:
        poll_until(lambda: len(ids) >= 100, timeout_s=30, what="jobs flowing before the move")
        moved = run_cli(["migrate", "run", "--from", "sqlite:///gochatd.db", "--to",
                         fresh_pg_url, "--all", "--cutover", "--report", "move.json"],
                        env, cwd=tmp_path, timeout_s=120)
        assert moved.returncode == 0, moved.stderr
        at_cutover = len(ids)
        poll_until(lambda: len(ids) >= at_cutover + 50, timeout_s=30,
                   what="jobs flowing after the move")
    finally:
        stop.set()
        producer.join(timeout=60)
    assert "Traceback" not in moved.stderr
    assert "equal" in moved.stderr and "DIFFERENT" not in moved.stderr

    # The CLI, unchanged, now enqueues into PostgreSQL and lists from it.
    cli = run_cli(["enqueue", "sys:noop", "--payload", '{"after": true}'], env, cwd=tmp_path)
    assert cli.returncode == 0, cli.stderr
    cli_id = json.loads(cli.stdout)["id"]
    wanted = set(ids) | {cli_id}

    def completed() -> set[int] | None:
        listed = run_cli(["jobs", "list", "--status", "completed", "--json", "--limit",
                          "10000"], env, cwd=tmp_path)
        assert listed.returncode == 0, listed.stderr
        done = {j["id"] for j in json.loads(listed.stdout)}
        return done if done >= wanted else None

    poll_until(completed, timeout_s=60, interval_s=0.3, what=f"{len(wanted)} jobs completed")
    rows = query(fresh_pg_url, "SELECT id, status, attempts, fence FROM background_jobs")
    in_pg = {r[0]: r[1:] for r in rows}
    assert wanted <= set(in_pg)  # every job, old and new, lives in PostgreSQL now
    assert all(in_pg[i] == ("completed", 1, 1) for i in wanted)  # each claimed and run once
    late = query(db_url, "SELECT count(*) FROM background_jobs WHERE id = %s", [cli_id])
    assert late[0][0] == 0  # nothing new was written to the SQLite file

    report = json.loads((tmp_path / "move.json").read_text())
    assert report["command"] == "run"
    checks = [t for s in report["scopes"] for v in s.get("validate", {}).values()
              for t in v["tables"].values()]
    assert checks and all(t["source"]["sha256"] == t["destination"]["sha256"] for t in checks)

    status = run_cli(["migrate", "status", "--from", "sqlite:///gochatd.db"], env, cwd=tmp_path)
    assert status.returncode == 0 and "destination" in status.stdout
    assert "1 of 1 live" in status.stdout  # the daemon acknowledged the route

    # Rolling back one tenant of the --all move says what happened, and changes nothing.
    back = ["migrate", "rollback", "--from", "sqlite:///gochatd.db", "--to", fresh_pg_url,
            "--tenants", "default"]
    preview = run_cli([*back, "--dry-run"], env, cwd=tmp_path)
    assert preview.returncode == 0, preview.stderr
    assert "would refuse: every tenant was moved together (--all)" in preview.stdout
    refused = run_cli(back, env, cwd=tmp_path)
    assert refused.returncode == 2 and refused.stdout == "", refused
    assert refused.stderr.splitlines() == [
        "gochatd: tenant 'default': nothing to roll back: every tenant was moved together "
        "(--all), not this tenant alone; roll back with --all"]
    assert daemon.stop() == 0
    daemon.assert_clean_output()
