"""Catch-up, the safe horizon, live validate and the delta check, on real PostgreSQL and
SQLite: writes made after the copy (inserts, status changes, retention deletes, queue
resumes) reach the destination; a crashed catch-up resumes; an open transaction holds the
horizon; validate stays exact under later writes; one tenant never touches another."""

from __future__ import annotations

import json
import sqlite3
import subprocess
import sys
import time
from datetime import timedelta
from pathlib import Path
from typing import Any

import psycopg
import pytest

from gochatd.cli.program import main
from gochatd.migrate.backends import Database, MigrateError, parse_endpoint
from gochatd.migrate.canonical import Row, canonical_bytes
from gochatd.migrate.catch_up import PHASE, catch_up_scope
from gochatd.migrate.changes import safe_horizon
from gochatd.migrate.route_control import prepare_tracking
from gochatd.migrate.state import DatabaseStateStore
from gochatd.migrate.tables import (
    BACKGROUND_JOBS,
    GLOBAL_SCOPE,
    GLOBAL_TABLES,
    PERIODIC_SLOTS,
    QUEUE_PAUSES,
    TENANT_TABLES,
    Table,
)
from gochatd.migrate.validate import delta_check, validate_scope
from tests.migrate.support import (
    T0,
    destination_label,
    file_url,
    job_rows,
    kill_on_progress,
    migrated,
    open_db,
    read_all,
    record_start,
    seed,
)

PAIRS = ["sqlite->postgres", "postgres->postgres", "postgres->sqlite"]
GOCHATD = str(Path(sys.executable).with_name("gochatd"))


@pytest.fixture(params=PAIRS)
def pair(request: pytest.FixtureRequest, tmp_path: Path) -> tuple[str, str]:
    src_kind, dst_kind = request.param.split("->")
    if src_kind == "sqlite":
        source = migrated(file_url(tmp_path / "source.db"))
    else:
        source = str(request.getfixturevalue("pg_source"))
        _forget_changes(source)
    if dst_kind == "sqlite":
        destination = file_url(tmp_path / "destination.db")
    else:
        destination = str(request.getfixturevalue("pg_scratch"))
    return source, destination


def _forget_changes(pg_url: str) -> None:
    """The run's database keeps earlier tests' tombstones and routes; start from none."""
    with psycopg.connect(pg_url, autocommit=True) as conn:
        conn.execute("DELETE FROM gochatd_change_tombstones")
        conn.execute("DELETE FROM gochatd_routes")


def _sql(url: str, *statements: str) -> None:
    db = open_db(url)
    try:
        for statement in statements:
            db.execute(statement)
    finally:
        db.close()


def _write(url: str, table: Table, rows: list[Row]) -> None:
    db = open_db(url)
    try:
        db.write_batch(table, rows)
    finally:
        db.close()


def _new_jobs(tenant: str, first_id: int, count: int) -> list[Row]:
    rows = job_rows(tenant, first_id, count)
    for row in rows:  # idempotency keys of their own: job_rows' would collide with the seed
        row["idempotency_key"] = f"new-{row['id']}"
    return rows


def _copy(source: str, destination: str, *scope_args: str) -> None:
    code = main(["migrate", "copy", "--from", source, "--to", destination, *scope_args,
                 "--migrate-destination"])
    assert code == 0


def _start_and_copy(source: str, destination: str, scopes: list[str]) -> int:
    watermark = record_start(source, destination, scopes)
    tenants = [s for s in scopes if s != GLOBAL_SCOPE]
    _copy(source, destination,
          *(["--all"] if GLOBAL_SCOPE in scopes else ["--tenants", ",".join(tenants)]))
    return watermark


def _tables(scope: str) -> tuple[Table, ...]:
    return GLOBAL_TABLES if scope == GLOBAL_SCOPE else TENANT_TABLES


def _catch_up(source: str, destination: str, scope: str, *,
              destination_db: Database | None = None, **options: Any) -> dict[str, Any]:
    src = open_db(source)
    dst = destination_db or open_db(destination, "destination")
    options.setdefault("batch_size", 7)
    try:
        return catch_up_scope(src, dst, scope=scope, tables=_tables(scope),
                              state=DatabaseStateStore(src),
                              destination_label=destination_label(destination), **options)
    finally:
        src.close()
        dst.close()


def _validate(source: str, destination: str, scope: str,
              watermark: int | None = None) -> dict[str, Any]:
    src, dst = open_db(source), open_db(destination, "destination")
    try:
        return validate_scope(src, dst, scope=scope, tables=_tables(scope),
                              state=DatabaseStateStore(src),
                              destination_label=destination_label(destination), batch_size=5,
                              watermark=watermark)
    finally:
        src.close()
        dst.close()


def _canon(url: str, table: Table, tenant: str | None) -> list[bytes]:
    return [canonical_bytes(r) for r in read_all(url, table, tenant)]


def _same(source: str, destination: str, table: Table, tenant: str | None) -> bool:
    return _canon(source, table, tenant) == _canon(destination, table, tenant)


def _counter(url: str) -> int:
    db = open_db(url)
    try:
        return db.change_counter()
    finally:
        db.close()


def test_writes_after_the_copy_are_applied_and_a_second_catch_up_is_harmless(
    pair: tuple[str, str], capsys: pytest.CaptureFixture[str],
) -> None:
    source, destination = pair
    seed(source, tenants={"acme": 30, "beta": 10})
    watermark = _start_and_copy(source, destination, [GLOBAL_SCOPE, "acme", "beta"])
    _write(source, BACKGROUND_JOBS, _new_jobs("acme", 100, 5))
    _sql(source,
         "UPDATE background_jobs SET status = 'completed', attempts = attempts + 1 "
         "WHERE id IN (1, 2, 3)",
         # retention: acme's dead jobs go (ids 5, 11, 17, 23, 29 and the new 104)
         "DELETE FROM background_jobs WHERE tenant_id = 'acme' AND status = 'dead'",
         "UPDATE reply_outbox SET status = 'sent', attempts = 2 WHERE id = 1",
         "DELETE FROM reply_outbox WHERE id = 2",
         "UPDATE background_jobs SET status = 'cancelled' WHERE id = 41",
         # queue resumes; 'mail' is paused again afterwards (delete, then write, same key)
         "DELETE FROM gochatd_queue_pauses WHERE queue IN ('mail', 'Zeta-1')")
    _write(source, QUEUE_PAUSES, [
        {"queue": "mail", "paused_at": T0 + timedelta(days=1), "paused_by": "night"},
        {"queue": "bulk", "paused_at": T0, "paused_by": "ops"}])
    _write(source, PERIODIC_SLOTS, [
        {"name": "nightly.report", "last_slot": T0 + timedelta(days=1), "updated_at": T0}])
    assert not _validate(source, destination, "acme")["equal"]  # the copy is behind

    reports = {scope: _catch_up(source, destination, scope)
               for scope in (GLOBAL_SCOPE, "acme", "beta")}
    acme = reports["acme"]["tables"]
    assert acme["background_jobs"] == {"rows": 4 + 3, "deletes": 6}
    assert acme["reply_outbox"] == {"rows": 1, "deletes": 1}
    fleet = reports[GLOBAL_SCOPE]["tables"]
    assert fleet["gochatd_queue_pauses"] == {"rows": 2, "deletes": 2}
    assert fleet["gochatd_periodic_slots"] == {"rows": 1, "deletes": 0}
    assert reports["beta"]["tables"]["background_jobs"] == {"rows": 1, "deletes": 0}
    for report in reports.values():
        assert report["applied"] <= _counter(source) and report["lag"] == 0

    for tenant in ("acme", "beta"):
        for table in TENANT_TABLES:
            assert _same(source, destination, table, tenant), (tenant, table.name)
    for table in GLOBAL_TABLES:
        assert _same(source, destination, table, None), table.name
    statuses = {r["id"]: r["status"] for r in read_all(destination, BACKGROUND_JOBS, "acme")}
    assert statuses[1] == "completed" and 103 in statuses
    assert not {5, 104} & set(statuses)
    assert {r["queue"]: r["paused_by"] for r in read_all(destination, QUEUE_PAUSES, None)} \
        == {"mail": "night", "bulk": "ops"}

    src, dst = open_db(source), open_db(destination, "destination")
    try:
        fleet_delta = delta_check(src, dst, scope=GLOBAL_SCOPE, tables=GLOBAL_TABLES,
                                  since=watermark)
    finally:
        src.close()
        dst.close()
    assert fleet_delta["equal"]  # text keys: the resumed 'Zeta-1' is missing on both sides
    assert fleet_delta["tables"]["gochatd_queue_pauses"]["checked"] == 3
    code = main(["migrate", "validate", "--from", source, "--to", destination, "--all"])
    assert code == 0, capsys.readouterr().err
    again = {scope: _catch_up(source, destination, scope)
             for scope in (GLOBAL_SCOPE, "acme", "beta")}
    for scope, report in again.items():
        assert report["this_run"]["rows"] == 0 and report["this_run"]["deletes"] == 0, scope
        assert report["rows"] == reports[scope]["rows"]  # totals carried, nothing re-applied
        assert _validate(source, destination, scope)["equal"]


class _Crash(Exception):
    pass


class _CrashingDestination(Database):
    """The real destination, failing on the n-th row batch as a killed process would."""

    def __init__(self, url: str, batches_before_crash: int) -> None:
        super().__init__(parse_endpoint("destination", url))
        self.left = batches_before_crash

    def write_batch(self, table: Table, rows: Any) -> None:
        if self.left == 0:
            raise _Crash
        self.left -= 1
        super().write_batch(table, rows)


def test_a_catch_up_that_crashes_mid_round_resumes_there_and_ends_equal(
    pair: tuple[str, str],
) -> None:
    source, destination = pair
    seed(source, tenants={"acme": 10}, fleet=False)
    watermark = _start_and_copy(source, destination, ["acme"])
    _write(source, BACKGROUND_JOBS, _new_jobs("acme", 100, 40))
    _sql(source, "DELETE FROM background_jobs WHERE id IN (1, 2, 3)")

    with pytest.raises(_Crash):
        _catch_up(source, destination, "acme", batch_size=5,
                  destination_db=_CrashingDestination(destination, 3))
    src = open_db(source)
    try:
        crashed = DatabaseStateStore(src).get("acme", PHASE, destination_label(destination))
    finally:
        src.close()
    assert crashed is not None and crashed.status == "failed"
    assert crashed.report["applied"] == watermark  # the round did not finish ...
    position = crashed.report["round"]["tables"]["background_jobs"]
    assert position["rows_after"] > watermark  # ... but recorded how far it got
    assert crashed.report["tables"]["background_jobs"] == {"rows": 15, "deletes": 3}
    assert len(read_all(destination, BACKGROUND_JOBS, "acme")) == 7 + 15

    resumed = _catch_up(source, destination, "acme", batch_size=5)
    assert resumed["resumed_from"] == watermark
    assert resumed["this_run"]["rows"] == 25 and resumed["this_run"]["deletes"] == 0
    assert resumed["tables"]["background_jobs"] == {"rows": 40, "deletes": 3}
    assert resumed["applied"] > watermark and "round" not in resumed
    assert _same(source, destination, BACKGROUND_JOBS, "acme")
    assert _validate(source, destination, "acme")["equal"]


def _catch_up_position(db_path: Path) -> tuple[str, int] | None:
    conn = sqlite3.connect(db_path, timeout=5)
    try:
        row = conn.execute("SELECT status, report FROM gochatd_migrations "
                           "WHERE tenant_id = 'acme' AND phase = 'catch-up'").fetchone()
    finally:
        conn.close()
    if row is None:
        return None
    return row[0], int(json.loads(row[1])["tables"].get("background_jobs", {}).get("rows", 0))


def test_a_catch_up_killed_with_sigkill_resumes_and_ends_equal(
    tmp_path: Path, pg_scratch: str,
) -> None:
    rows = 4000
    source_path = tmp_path / "source.db"
    source = migrated(file_url(source_path))
    seed(source, tenants={"acme": 5}, fleet=False)
    _start_and_copy(source, pg_scratch, ["acme"])
    _write(source, BACKGROUND_JOBS, _new_jobs("acme", 100, rows))
    argv = [GOCHATD, "migrate", "catch-up", "--from", source, "--to", pg_scratch,
            "--tenants", "acme", "--batch-size", "20"]
    kill_on_progress(argv, lambda: _catch_up_position(source_path), timeout_s=30,
                     what="catch-up")
    killed = _catch_up_position(source_path)
    assert killed is not None and killed[0] == "running" and 0 < killed[1] < rows, killed

    report = tmp_path / "resume.json"
    done = subprocess.run([*argv, "--report", str(report)], capture_output=True, text=True,
                          timeout=120)
    assert done.returncode == 0, done.stderr
    scope = json.loads(report.read_text())["scopes"][0]
    # At most the one batch written but not yet recorded is applied twice.
    assert rows - killed[1] <= scope["this_run"]["rows"] <= rows - killed[1] + 20
    assert scope["lag"] == 0 and "lag 0" in done.stdout
    check = subprocess.run([GOCHATD, "migrate", "validate", "--from", source, "--to",
                            pg_scratch, "--tenants", "acme"], capture_output=True, text=True,
                           timeout=60)
    assert check.returncode == 0, check.stderr
    assert f"{rows + 5:>10} {rows + 5:>10} equal" in check.stdout


def test_the_postgres_horizon_waits_for_an_open_writer_and_never_passes_it(
    pg_source: str, tmp_path: Path,
) -> None:
    _forget_changes(pg_source)
    destination = file_url(tmp_path / "destination.db")
    seed(pg_source, tenants={"acme": 6}, fleet=False)
    _start_and_copy(pg_source, destination, ["acme"])
    with psycopg.connect(pg_source) as writer:  # not autocommit: the UPDATE stays open
        writer.execute("UPDATE background_jobs SET status = 'completed' WHERE id = 1")
        _sql(pg_source, "UPDATE background_jobs SET status = 'cancelled' WHERE id = 2")
        src = open_db(pg_source)
        try:
            started = time.monotonic()
            with pytest.raises(MigrateError, match="open too long") as raised:
                safe_horizon(src, timeout_s=0.3)
            assert time.monotonic() - started >= 0.3  # it waited, then gave up
            assert "UPDATE" not in str(raised.value) and "SELECT" not in str(raised.value)
        finally:
            src.close()
        with pytest.raises(MigrateError, match="open too long"):
            _catch_up(pg_source, destination, "acme", horizon_timeout_s=0.2)
        # The committed change drew its number after the open one's: not applied either.
        statuses = {r["id"]: r["status"] for r in read_all(destination, BACKGROUND_JOBS, "acme")}
        assert statuses[1] == "queued" and statuses[2] == "running"
        writer.commit()
    src = open_db(pg_source)
    try:
        assert safe_horizon(src, timeout_s=5) == src.change_counter()
    finally:
        src.close()
    report = _catch_up(pg_source, destination, "acme")
    assert report["tables"]["background_jobs"]["rows"] == 2
    statuses = {r["id"]: r["status"] for r in read_all(destination, BACKGROUND_JOBS, "acme")}
    assert statuses[1] == "completed" and statuses[2] == "cancelled"
    assert _validate(pg_source, destination, "acme")["equal"]


def test_the_sqlite_horizon_is_the_committed_counter(tmp_path: Path) -> None:
    path = tmp_path / "source.db"
    source = migrated(file_url(path))
    seed(source, tenants={"acme": 3}, fleet=False)
    db = open_db(source)
    prepare_tracking(db)  # as `migrate start` does
    writer = sqlite3.connect(path, isolation_level=None)
    try:
        before = safe_horizon(db)
        writer.execute("BEGIN IMMEDIATE")
        writer.execute("UPDATE background_jobs SET status = 'completed' WHERE id = 1")
        assert safe_horizon(db) == before  # the open write's number is not visible
        writer.execute("COMMIT")
        assert safe_horizon(db) == before + 1
    finally:
        writer.close()
        db.close()


def test_live_validate_leaves_out_keys_changed_after_the_applied_horizon(
    pair: tuple[str, str],
) -> None:
    source, destination = pair
    seed(source, tenants={"acme": 20}, fleet=False)
    _start_and_copy(source, destination, ["acme"])
    _sql(source, "UPDATE background_jobs SET status = 'completed' WHERE id = 4")
    applied = _catch_up(source, destination, "acme")["applied"]
    quiet = _validate(source, destination, "acme")
    assert quiet["equal"] and quiet["excluded_in_flight"] == 0
    assert quiet["watermark"] == applied

    # Writes after the catch-up: the destination does not have them yet.
    _write(source, BACKGROUND_JOBS, _new_jobs("acme", 100, 1))
    _sql(source,
         "UPDATE background_jobs SET status = 'cancelled' WHERE id IN (1, 2)",
         "DELETE FROM background_jobs WHERE id = 3",
         "UPDATE reply_outbox SET status = 'sent' WHERE id = 1")
    in_flight = None
    if source.startswith("postgresql"):  # and one still uncommitted while validate runs
        in_flight = psycopg.connect(source)
        in_flight.execute("UPDATE background_jobs SET status = 'dead' WHERE id = 5")
    try:
        live = _validate(source, destination, "acme")
    finally:
        if in_flight is not None:
            in_flight.commit()
            in_flight.close()
    assert live["equal"], live
    assert live["watermark"] == applied and live["counter"] > applied
    assert live["tables"]["background_jobs"]["excluded_in_flight"] == 4
    assert live["tables"]["reply_outbox"]["excluded_in_flight"] == 1
    # The uncommitted write is invisible to the snapshot: neither excluded nor compared new.
    assert live["excluded_in_flight"] == 5
    # At the source's own counter nothing is left out, and the difference shows.
    full = _validate(source, destination, "acme", watermark=_counter(source))
    assert not full["equal"] and full["excluded_in_flight"] == 0
    assert full["tables"]["background_jobs"]["first_differing_keys"]["id"][:3] == [1, 2, 3]

    _catch_up(source, destination, "acme")
    after = _validate(source, destination, "acme")
    assert after["equal"] and after["excluded_in_flight"] == 0


def test_catching_up_one_tenant_never_writes_another(pair: tuple[str, str]) -> None:
    source, destination = pair
    seed(source, tenants={"a": 10, "b": 8}, fleet=False)
    _start_and_copy(source, destination, ["a", "b"])
    before_b = [_canon(destination, t, "b") for t in TENANT_TABLES]
    _write(source, BACKGROUND_JOBS, _new_jobs("b", 100, 3))
    _sql(source,
         "UPDATE background_jobs SET status = 'completed' WHERE tenant_id = 'b'",
         "DELETE FROM reply_outbox WHERE tenant_id = 'b' AND id = 21",
         "DELETE FROM background_jobs WHERE tenant_id = 'b' AND id = 22",
         "UPDATE background_jobs SET status = 'cancelled' WHERE id = 1")

    report = _catch_up(source, destination, "a")
    assert report["tables"]["background_jobs"] == {"rows": 1, "deletes": 0}
    assert report["tables"]["reply_outbox"] == {"rows": 0, "deletes": 0}
    assert [_canon(destination, t, "b") for t in TENANT_TABLES] == before_b
    assert len(read_all(destination, BACKGROUND_JOBS, "b")) == 8
    assert _validate(source, destination, "a")["equal"]
    assert not _validate(source, destination, "b")["equal"]  # b's changes were not applied


def test_a_corrupted_destination_row_is_named_by_validate_and_the_delta_check(
    pair: tuple[str, str],
) -> None:
    source, destination = pair
    seed(source, tenants={"acme": 12}, fleet=False)
    watermark = _start_and_copy(source, destination, ["acme"])
    _sql(source, "UPDATE background_jobs SET status = 'completed' WHERE id IN (7, 8)")
    _catch_up(source, destination, "acme")
    src, dst = open_db(source), open_db(destination, "destination")
    try:
        clean = delta_check(src, dst, scope="acme", tables=TENANT_TABLES, since=watermark)
    finally:
        src.close()
        dst.close()
    assert clean["equal"] and clean["tables"]["background_jobs"]["checked"] == 2

    _sql(destination,
         "UPDATE background_jobs SET payload = '{\"secret\": \"hunter2\"}' WHERE id = 7",
         "DELETE FROM reply_outbox WHERE id = 3")
    report = _validate(source, destination, "acme")
    assert not report["equal"]
    assert report["tables"]["background_jobs"]["first_differing_keys"] == {"id": [7]}
    assert report["tables"]["reply_outbox"]["first_differing_keys"] == {"id": [3]}
    src, dst = open_db(source), open_db(destination, "destination")
    try:
        delta = delta_check(src, dst, scope="acme", tables=TENANT_TABLES, since=watermark)
    finally:
        src.close()
        dst.close()
    jobs, replies = delta["tables"]["background_jobs"], delta["tables"]["reply_outbox"]
    assert not delta["equal"]
    assert jobs["different"] == [7] and jobs["checked"] == 2 and not jobs["equal"]
    # A row the source did not change is not checked row by row; the counts catch it.
    assert replies["checked"] == 0 and replies["different"] == []
    assert (replies["source_count"], replies["destination_count"]) == (4, 3)
    assert not replies["equal"]
    text = json.dumps(report, default=str) + json.dumps(delta, default=str)
    assert "hunter2" not in text and "secret" not in text


def test_catch_up_cli_needs_start_dry_runs_without_writing_and_prints_the_lag(
    tmp_path: Path, pg_scratch: str, capsys: pytest.CaptureFixture[str],
) -> None:
    source = migrated(file_url(tmp_path / "source.db"))
    seed(source, tenants={"acme": 10}, fleet=False)
    argv = ["migrate", "catch-up", "--from", source, "--to", pg_scratch, "--tenants", "acme"]
    _copy(source, pg_scratch, "--tenants", "acme")
    capsys.readouterr()
    assert main(argv) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "gochatd move start" in err[0]

    record_start(source, pg_scratch, ["acme"])
    _sql(source, "UPDATE background_jobs SET status = 'completed' WHERE id IN (1, 2)",
         "DELETE FROM background_jobs WHERE id = 3")
    assert main([*argv, "--dry-run"]) == 0
    out = capsys.readouterr().out
    assert "background_jobs" in out and "would apply 2 rows, 1 deletes" in out
    src = open_db(source)
    try:
        assert DatabaseStateStore(src).get("acme", PHASE, destination_label(pg_scratch)) is None
    finally:
        src.close()
    assert len(read_all(pg_scratch, BACKGROUND_JOBS, "acme")) == 10

    report_path = tmp_path / "catch-up.json"
    assert main([*argv, "--report", str(report_path)]) == 0
    out = capsys.readouterr().out
    lines = [line.split() for line in out.splitlines()]
    assert ["acme", "background_jobs", "2", "rows", "1", "deletes"] in lines
    assert any(line[:3] == ["acme", "lag", "0"] for line in lines), out
    report = json.loads(report_path.read_text("utf-8"))
    assert report["command"] == "catch-up" and report["scopes"][0]["this_run"]["rows"] == 2
    assert main(["migrate", "validate", "--from", source, "--to", pg_scratch,
                 "--tenants", "acme"]) == 0
    assert main(["migrate", "status", "--from", source]) == 0
    assert "catch-up" in capsys.readouterr().out
