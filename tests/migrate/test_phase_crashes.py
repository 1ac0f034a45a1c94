"""The live phases against crashes and bad data, with real ``gochatd migrate`` processes:

- a migrator killed with SIGKILL in the middle of start, copy, catch-up, validate, cutover or
  rollback is re-run and ends where an uninterrupted run would (route state, equal
  validation, every row once);
- a destination that differs blocks the cutover (exit 3, the key named, never the row);
- rollback is refused once the destination wrote on its own, and loses nothing otherwise;
- moving one tenant never touches another, nor the fleet-wide tables.

A phase is held open deterministically by a fake live daemon (a fresh row in
``gochatd_route_acks``) that has not seen the route's version: the barrier waits for it.
"""

from __future__ import annotations

import json
import signal
import sqlite3
import subprocess
import sys
import time
from collections.abc import Callable
from contextlib import closing
from pathlib import Path
from typing import Any

import psycopg
import pytest

from gochatd.migrate.canonical import canonical_bytes
from gochatd.migrate.route_control import get_route
from gochatd.migrate.state import DatabaseStateStore, PhaseState
from gochatd.migrate.tables import (
    BACKGROUND_JOBS,
    GLOBAL_TABLES,
    REPLY_OUTBOX,
    TENANT_TABLES,
    Table,
)
from gochatd.store.route_table import RouteState
from tests.migrate.support import destination_label, file_url, migrated, open_db, read_all, seed

GOCHATD = str(Path(sys.executable).with_name("gochatd"))
TENANT, OTHER = "acme", "beta"
#: Jobs seeded for the phases that must be caught mid-way (copy, catch-up, validate).
BIG = 4000
SMALL = 200
#: The fake daemon that holds the barriers.
SLOW = "slow-daemon"
#: A version above any route's: the slow daemon has caught up.
CAUGHT_UP = 2**50
#: How long a test waits for the migrator to reach the point where it is killed.
REACH_S = 30.0
#: Long enough that a held barrier outlives the test.
HOLD = ("--ack-timeout", "60")
SECRET = "s3cr3t-payload-text"
READ_ONLY = "read-only"

#: Ids of the writes made by _write_meanwhile (seeded ids are 1..count).
NEW_IDS = (900_001, 900_002, 900_003)
DELETED_ID = 4


#: Each crash test runs on one pair (the suite has a time budget); together they cover
#: both. Tests not named here run on sqlite->postgres, the README's move.
ON_POSTGRES_TO_POSTGRES = {
    "test_start_killed_in_its_barrier_keeps_the_first_watermark",
    "test_catch_up_killed_mid_round_resumes_the_round",
    "test_cutover_killed_while_frozen_finishes_when_run_again",
    "test_rollback_killed_in_its_barrier_finishes_when_run_again",
    "test_cutover_after_a_passing_validate_revalidates_and_names_the_changed_key",
    "test_rollback_before_any_destination_write_loses_nothing",
}


@pytest.fixture
def pair(request: pytest.FixtureRequest, tmp_path: Path) -> tuple[str, str]:
    kinds = ("postgres->postgres" if request.node.originalname in ON_POSTGRES_TO_POSTGRES
             else "sqlite->postgres")
    return _pair(request, tmp_path, kinds)


@pytest.fixture(params=["sqlite->postgres", "postgres->postgres", "postgres->sqlite"])
def any_pair(request: pytest.FixtureRequest, tmp_path: Path) -> tuple[str, str]:
    return _pair(request, tmp_path, request.param)


def _pair(request: pytest.FixtureRequest, tmp_path: Path, kinds: str) -> tuple[str, str]:
    src_kind, dst_kind = kinds.split("->")
    source = (migrated(file_url(tmp_path / "source.db")) if src_kind == "sqlite"
              else str(request.getfixturevalue("pg_source")))
    # The destination gets its schema from `migrate start` (a SQLite file is created).
    destination = (file_url(tmp_path / "destination.db") if dst_kind == "sqlite"
                   else str(request.getfixturevalue("pg_scratch")))
    return source, destination


# -- the migrator as a process ----------------------------------------------------------


def _argv(phase: str, source: str, destination: str, *extra: str) -> list[str]:
    return [GOCHATD, "migrate", phase, "--from", source, "--to", destination,
            "--tenants", TENANT, *extra]


def _migrate(phase: str, source: str, destination: str, *extra: str,
             expect: int = 0) -> subprocess.CompletedProcess[str]:
    done = subprocess.run(_argv(phase, source, destination, *extra), capture_output=True,
                          text=True, timeout=120)
    assert done.returncode == expect, (phase, done.returncode, done.stderr)
    return done


def _kill_when(argv: list[str], reached: Callable[[], bool], log: Path) -> None:
    """Run the migrator and SIGKILL it as soon as ``reached()`` (a database reading) holds."""
    with log.open("wb") as out:
        proc = subprocess.Popen(argv, stdout=out, stderr=subprocess.STDOUT)
        try:
            deadline = time.monotonic() + REACH_S
            while not reached():
                assert proc.poll() is None, (
                    f"the migrator ended ({proc.returncode}) before the point to kill it at: "
                    f"{log.read_text(errors='replace')}")
                assert time.monotonic() < deadline, "the migrator never got there"
                time.sleep(0.005)
            proc.send_signal(signal.SIGKILL)
            proc.wait(timeout=10)
        finally:
            if proc.poll() is None:
                proc.kill()
                proc.wait()
    assert proc.returncode == -signal.SIGKILL


class Probe:
    """Reads the source's route and phase records while a migrator runs."""

    def __init__(self, source: str, destination: str) -> None:
        self.db = open_db(source)
        self.state = DatabaseStateStore(self.db)
        self.label = destination_label(destination)

    def route(self, key: str = TENANT) -> RouteState | None:
        row = get_route(self.db, key)
        return None if row is None else row.state

    def version(self, key: str = TENANT) -> int:
        row = get_route(self.db, key)
        assert row is not None
        return row.version

    def phase(self, phase: str, scope: str = TENANT) -> PhaseState | None:
        return self.state.get(scope, phase, self.label)

    def running(self, phase: str) -> PhaseState | None:
        found = self.phase(phase)
        return found if found is not None and found.status == "running" else None

    def close(self) -> None:
        self.db.close()


def _probe(source: str, destination: str) -> closing[Probe]:
    return closing(Probe(source, destination))


def _report(path: Path) -> dict[str, Any]:
    loaded: dict[str, Any] = json.loads(path.read_text())
    return loaded


# -- databases ---------------------------------------------------------------------------


def _sql(url: str, *statements: str) -> None:
    db = open_db(url)
    try:
        for statement in statements:
            db.execute(statement)
    finally:
        db.close()


def _slow_daemon(source: str, version: int) -> None:
    """A live daemon (acknowledged just now, by the database clock) that has seen
    ``version``."""
    db = open_db(source)
    try:
        now = "now()" if db.dialect == "postgres" else "(julianday('now') - 2440587.5) * 86400.0"
        db.execute(f"INSERT INTO gochatd_route_acks (worker_id, version, acked_at) "
                   f"VALUES ('{SLOW}', {version}, {now}) ON CONFLICT (worker_id) DO UPDATE "
                   "SET version = excluded.version, acked_at = excluded.acked_at")
    finally:
        db.close()


def _insert_job(url: str, job_id: int, tenant: str = TENANT, payload: str = '{"n": 1}') -> None:
    _sql(url, "INSERT INTO background_jobs (id, tenant_id, job_type, payload) "
              f"VALUES ({job_id}, '{tenant}', 'test:late', '{payload}')")


def _write_meanwhile(url: str) -> None:
    """Tracked writes of the tenant in the source: new jobs, updates, a delete."""
    for job_id in NEW_IDS:
        _insert_job(url, job_id)
    _sql(url,
         "UPDATE background_jobs SET status = 'completed', attempts = attempts + 1 "
         "WHERE id IN (1, 2, 3)",
         f"DELETE FROM background_jobs WHERE id = {DELETED_ID}",
         "UPDATE reply_outbox SET status = 'sent', attempts = 3 WHERE id = 1")


def _expected_ids(seeded: int, *, meanwhile: bool) -> set[int]:
    ids = set(range(1, seeded + 1))
    return (ids - {DELETED_ID}) | set(NEW_IDS) if meanwhile else ids


def _rows(url: str, tenant: str | None, tables: tuple[Table, ...] = TENANT_TABLES,
          ) -> dict[str, list[bytes]]:
    return {t.name: [canonical_bytes(r) for r in read_all(url, t, tenant)] for t in tables}


def _job_ids(url: str, tenant: str) -> list[int]:
    return [int(r["id"]) for r in read_all(url, BACKGROUND_JOBS, tenant)]


def _raw(url: str, table: Table, tenant: str | None) -> list[tuple[Any, ...]]:
    """Every column as stored, change_seq included: a row rewritten with the same values
    still shows."""
    db = open_db(url)
    try:
        where = f" WHERE tenant_id = '{tenant}'" if tenant is not None else ""
        return db.fetch(f"SELECT * FROM {table.name}{where} ORDER BY {table.key}")
    finally:
        db.close()


def _count(url: str, table: Table, tenant: str | None) -> int:
    db = open_db(url)
    try:
        return db.count(table, tenant)
    finally:
        db.close()


def _assert_equal(source: str, destination: str, ids: set[int]) -> None:
    """Both sides hold the tenant's rows, each once, and ``migrate validate`` agrees."""
    assert set(_job_ids(source, TENANT)) == ids
    assert _job_ids(destination, TENANT) == sorted(ids)
    assert _rows(source, TENANT) == _rows(destination, TENANT)
    check = _migrate("validate", source, destination)
    assert f"{len(ids):>10} {len(ids):>10} equal" in check.stdout, check.stdout
    assert "DIFFERENT" not in check.stdout


def _refused(url: str, job_id: int) -> None:
    with pytest.raises((psycopg.Error, sqlite3.Error), match=READ_ONLY):
        _insert_job(url, job_id)


# -- crashes -----------------------------------------------------------------------------


def test_start_killed_in_its_barrier_keeps_the_first_watermark(
    pair: tuple[str, str], tmp_path: Path,
) -> None:
    source, destination = pair
    seed(source, tenants={TENANT: SMALL, OTHER: 20})
    _slow_daemon(source, 0)
    with _probe(source, destination) as probe:
        _kill_when(_argv("start", source, destination, *HOLD),
                   lambda: probe.running("start") is not None, tmp_path / "start.log")
        killed = probe.running("start")
        assert killed is not None and probe.route() is RouteState.TRACKING
        watermark = int(killed.report["watermark"])
        _write_meanwhile(source)  # tracking: writes flow, and are numbered above it

        _slow_daemon(source, CAUGHT_UP)
        report = tmp_path / "start.json"
        _migrate("start", source, destination, *HOLD, "--report", str(report))
        entry = _report(report)["scopes"][0]
        assert entry["watermark"] == watermark
        assert entry["fleet"]["waiting_for"] == []
        finished = probe.phase("start")
        assert finished is not None and finished.status == "done"
        assert finished.report["watermark"] == watermark

        _migrate("run", source, destination, "--cutover")
        assert probe.route() is RouteState.DESTINATION
    _assert_equal(source, destination, _expected_ids(SMALL, meanwhile=True))


def _copied_up_to(state: PhaseState | None) -> int:
    if state is None or state.status != "running":
        return 0
    return int(state.report.get("tables", {}).get(BACKGROUND_JOBS.name, {}).get("last_key", 0))


def test_run_killed_mid_copy_resumes_the_copy_and_loses_nothing(
    pair: tuple[str, str], tmp_path: Path,
) -> None:
    source, destination = pair
    seed(source, tenants={TENANT: BIG, OTHER: 20})
    batch = ("--batch-size", "25")
    with _probe(source, destination) as probe:
        _kill_when(_argv("run", source, destination, *batch),
                   lambda: _copied_up_to(probe.phase("copy")) > 0, tmp_path / "run.log")
        killed_at = _copied_up_to(probe.phase("copy"))
        assert 0 < killed_at < BIG
        assert probe.route() is RouteState.TRACKING
        assert killed_at <= _count(destination, BACKGROUND_JOBS, TENANT) < BIG
        _write_meanwhile(source)

        report = tmp_path / "run.json"
        _migrate("run", source, destination, *batch, "--cutover", "--report", str(report))
        copy = next(s["copy"][TENANT] for s in _report(report)["scopes"] if "copy" in s)
        assert copy["resumed"] is True
        assert copy["tables"][BACKGROUND_JOBS.name]["resumed_from"] == killed_at
        assert probe.route() is RouteState.DESTINATION
    _assert_equal(source, destination, _expected_ids(BIG, meanwhile=True))


def test_catch_up_killed_mid_round_resumes_the_round(
    pair: tuple[str, str], tmp_path: Path,
) -> None:
    source, destination = pair
    seed(source, tenants={TENANT: BIG, OTHER: 20})
    _migrate("start", source, destination)
    _migrate("copy", source, destination)
    # One change per job for catch-up to apply, in batches of 25.
    _sql(source, f"UPDATE background_jobs SET fence = fence + 1 WHERE tenant_id = '{TENANT}'")
    batch = ("--batch-size", "25")

    def applying(state: PhaseState | None) -> int:
        if state is None or state.status != "running" or "round" not in state.report:
            return 0
        return int(state.report["rows"])

    with _probe(source, destination) as probe:
        _kill_when(_argv("catch-up", source, destination, *batch),
                   lambda: applying(probe.phase("catch-up")) > 0, tmp_path / "catch-up.log")
        applied_before = applying(probe.phase("catch-up"))
        assert 0 < applied_before < BIG
        assert _rows(source, TENANT) != _rows(destination, TENANT)  # half applied

        report = tmp_path / "catch-up.json"
        _migrate("catch-up", source, destination, *batch, "--report", str(report))
        entry = _report(report)["scopes"][0]
        # The pending round went on from its last batch (at most that batch again).
        assert BIG - applied_before <= entry["this_run"]["rows"] <= BIG - applied_before + 25
        assert BIG <= entry["rows"] <= BIG + 25
        assert entry["lag"] == 0
        done = probe.phase("catch-up")
        assert done is not None and done.status == "done" and "round" not in done.report
        assert probe.route() is RouteState.TRACKING
    _assert_equal(source, destination, _expected_ids(BIG, meanwhile=False))


def test_validate_killed_midway_is_simply_run_again(
    pair: tuple[str, str], tmp_path: Path,
) -> None:
    source, destination = pair
    seed(source, tenants={TENANT: BIG, OTHER: 20})
    _migrate("start", source, destination)
    _migrate("copy", source, destination)
    with _probe(source, destination) as probe:
        _kill_when(_argv("validate", source, destination, "--batch-size", "50"),
                   lambda: probe.running("validate") is not None, tmp_path / "validate.log")
        killed = probe.phase("validate")
        assert killed is not None and killed.status == "running"
        assert "equal" not in killed.report

        again = _migrate("validate", source, destination)
        assert f"{BIG:>10} {BIG:>10} equal" in again.stdout
        done = probe.phase("validate")
        assert done is not None and done.status == "done" and done.report["equal"] is True

        _migrate("cutover", source, destination)
        assert probe.route() is RouteState.DESTINATION
    _assert_equal(source, destination, _expected_ids(BIG, meanwhile=False))


def test_cutover_killed_while_frozen_finishes_when_run_again(
    pair: tuple[str, str], tmp_path: Path,
) -> None:
    source, destination = pair
    seed(source, tenants={TENANT: SMALL, OTHER: 20})
    _migrate("run", source, destination)
    _slow_daemon(source, 0)
    with _probe(source, destination) as probe:
        _kill_when(_argv("cutover", source, destination, *HOLD),
                   lambda: probe.route() is RouteState.FROZEN
                   and probe.running("cutover") is not None, tmp_path / "cutover.log")
        assert probe.route() is RouteState.FROZEN
        killed = probe.running("cutover")
        assert killed is not None and "destination_watermark" not in killed.report
        _refused(source, 900_100)  # frozen: the source refuses the tenant's writes
        _insert_job(source, 900_101, tenant=OTHER)  # and only the tenant's

        _slow_daemon(source, CAUGHT_UP)
        report = tmp_path / "cutover.json"
        _migrate("cutover", source, destination, *HOLD, "--report", str(report))
        entry = _report(report)["scopes"][0]
        assert entry["fleet_destination"]["waiting_for"] == []
        assert isinstance(entry["destination_watermark"], int)
        assert probe.route() is RouteState.DESTINATION
        done = probe.phase("cutover")
        assert done is not None and done.status == "done"
    _assert_equal(source, destination, _expected_ids(SMALL, meanwhile=False))


def test_cutover_killed_in_its_last_barrier_can_still_be_rolled_back(
    pair: tuple[str, str], tmp_path: Path,
) -> None:
    """Killed after the route says ``destination`` but before every daemon acknowledged it:
    re-running cutover completes, and the record rollback needs (the destination's
    watermark) is there."""
    source, destination = pair
    seed(source, tenants={TENANT: SMALL, OTHER: 20})
    _migrate("run", source, destination)
    _slow_daemon(source, 0)
    with _probe(source, destination) as probe:
        acked: list[int] = []

        def cut_over() -> bool:
            state = probe.route()
            if state is RouteState.FROZEN and not acked:
                # The slow daemon sees the freeze, so the barrier it holds is the last one.
                acked.append(probe.version())
                _slow_daemon(source, acked[0])
            return state is RouteState.DESTINATION

        _kill_when(_argv("cutover", source, destination, *HOLD), cut_over,
                   tmp_path / "cutover.log")
        assert acked and probe.version() > acked[0]
        _slow_daemon(source, CAUGHT_UP)
        _migrate("cutover", source, destination, *HOLD)
        assert probe.route() is RouteState.DESTINATION
        done = probe.phase("cutover")
        assert done is not None and "destination_watermark" in done.report

        back = _migrate("rollback", source, destination, *HOLD)
        assert probe.route() is RouteState.SOURCE, back.stderr
    _insert_job(source, 900_200)  # the source is the writer again


def test_rollback_killed_in_its_barrier_finishes_when_run_again(
    pair: tuple[str, str], tmp_path: Path,
) -> None:
    source, destination = pair
    seed(source, tenants={TENANT: SMALL, OTHER: 20})
    _migrate("run", source, destination, "--cutover")
    _slow_daemon(source, 0)
    with _probe(source, destination) as probe:
        assert probe.route() is RouteState.DESTINATION
        _kill_when(_argv("rollback", source, destination, *HOLD),
                   lambda: probe.route() is RouteState.SOURCE, tmp_path / "rollback.log")
        assert probe.route() is RouteState.SOURCE

        _slow_daemon(source, CAUGHT_UP)
        report = tmp_path / "rollback.json"
        again = _migrate("rollback", source, destination, *HOLD, "--report", str(report))
        assert probe.route() is RouteState.SOURCE, again.stderr
        assert _report(report)["scopes"][0]["fleet"]["waiting_for"] == []
        done = probe.phase("rollback")
        assert done is not None and done.status == "done"
    _assert_equal(source, destination, _expected_ids(SMALL, meanwhile=False))
    _insert_job(source, 900_300)


# -- a differing destination blocks the cutover ------------------------------------------


def test_run_with_a_row_only_the_destination_has_is_blocked_naming_only_its_key(
    pair: tuple[str, str], tmp_path: Path,
) -> None:
    source, destination = pair
    seed(source, tenants={TENANT: SMALL, OTHER: 20})
    _migrate("start", source, destination)
    _migrate("copy", source, destination)
    _migrate("catch-up", source, destination)
    # `run` copies again (upserts), which would repair a changed row: the damage it cannot
    # repair is a row the source never had.
    _insert_job(destination, 777_777, payload=f'{{"secret": "{SECRET}"}}')
    report = tmp_path / "run.json"
    done = _migrate("run", source, destination, "--cutover", "--report", str(report),
                    expect=3)
    text = report.read_text()
    validated = next(s["validate"][TENANT] for s in _report(report)["scopes"]
                     if "validate" in s)
    jobs = validated["tables"][BACKGROUND_JOBS.name]
    assert jobs["equal"] is False and jobs["first_differing_keys"] == {"id": [777_777]}
    assert validated["tables"][REPLY_OUTBOX.name]["equal"] is True
    assert SECRET not in text and SECRET not in done.stderr + done.stdout
    assert "test:late" not in text
    assert len(done.stderr.strip().splitlines()) >= 1
    with _probe(source, destination) as probe:
        assert probe.route() is RouteState.TRACKING
        assert probe.phase("cutover") is None  # never attempted
    _insert_job(source, 900_400)  # still the writer


def test_cutover_after_a_passing_validate_revalidates_and_names_the_changed_key(
    pair: tuple[str, str], tmp_path: Path,
) -> None:
    source, destination = pair
    seed(source, tenants={TENANT: SMALL, OTHER: 20})
    _migrate("run", source, destination)  # validated equal, still tracking
    _sql(destination, f"UPDATE background_jobs SET status = 'dead', "
                      f"payload = '{{\"secret\": \"{SECRET}\"}}' WHERE id = 7")
    report = tmp_path / "cutover.json"
    done = _migrate("cutover", source, destination, "--report", str(report), expect=3)
    assert "[7]" in done.stderr and "background_jobs" in done.stderr
    assert SECRET not in done.stderr + done.stdout + report.read_text()
    with _probe(source, destination) as probe:
        assert probe.route() is RouteState.TRACKING
        checked = probe.phase("validate")
        assert checked is not None and checked.status == "failed"
        assert checked.report["tables"][BACKGROUND_JOBS.name]["first_differing_keys"] == {
            "id": [7]}
        assert SECRET not in json.dumps(checked.report)
    _insert_job(source, 900_500)


# -- rollback ------------------------------------------------------------------------------


def test_rollback_is_refused_once_the_destination_wrote_on_its_own(
    pair: tuple[str, str],
) -> None:
    source, destination = pair
    seed(source, tenants={TENANT: SMALL, OTHER: 20})
    _migrate("run", source, destination, "--cutover")
    _insert_job(destination, 900_600)  # a job the tenant enqueued after the cutover
    refused = _migrate("rollback", source, destination, expect=2)
    [line] = refused.stderr.strip().splitlines()
    assert "rollback refused" in line and "the destination has 1 write(s) of its own" in line
    with _probe(source, destination) as probe:
        assert probe.route() is RouteState.DESTINATION
    _refused(source, 900_601)
    assert 900_600 in _job_ids(destination, TENANT)


def test_rollback_before_any_destination_write_loses_nothing(
    pair: tuple[str, str],
) -> None:
    source, destination = pair
    seed(source, tenants={TENANT: SMALL, OTHER: 20})
    _migrate("run", source, destination)
    _write_meanwhile(source)  # after validate, before cutover: the final catch-up carries it
    _migrate("cutover", source, destination)
    with _probe(source, destination) as probe:
        assert probe.route() is RouteState.DESTINATION
        _refused(source, 900_700)
        _migrate("rollback", source, destination)
        assert probe.route() is RouteState.SOURCE
    _assert_equal(source, destination, _expected_ids(SMALL, meanwhile=True))
    _insert_job(source, 900_701)
    assert 900_701 in _job_ids(source, TENANT)


# -- tenant isolation ----------------------------------------------------------------------


def test_moving_one_tenant_never_touches_another(any_pair: tuple[str, str]) -> None:
    source, destination = any_pair
    seed(source, tenants={TENANT: SMALL, OTHER: 50})
    before = {t.name: _raw(source, t, OTHER) for t in TENANT_TABLES}
    fleet = {t.name: _raw(source, t, None) for t in GLOBAL_TABLES}
    assert all(before.values()) and all(fleet.values())

    _migrate("start", source, destination)
    _migrate("copy", source, destination)
    _write_meanwhile(source)
    _migrate("catch-up", source, destination)
    _migrate("validate", source, destination)
    _migrate("cutover", source, destination)

    assert {t.name: _raw(source, t, OTHER) for t in TENANT_TABLES} == before
    assert {t.name: _raw(source, t, None) for t in GLOBAL_TABLES} == fleet
    for table in TENANT_TABLES:
        assert _count(destination, table, OTHER) == 0
    for table in GLOBAL_TABLES:
        assert _count(destination, table, None) == 0
    with _probe(source, destination) as probe:
        assert [r[0] for r in probe.db.fetch("SELECT tenant_id FROM gochatd_routes")] == [TENANT]
        assert probe.route() is RouteState.DESTINATION
        assert {s.tenant for s in probe.state.list()} == {TENANT}
    assert set(_job_ids(destination, TENANT)) == _expected_ids(SMALL, meanwhile=True)
    _insert_job(source, 900_800, tenant=OTHER)  # the other tenant still writes at home
    _refused(source, 900_801)
