"""``gochatd migrate copy|validate`` end to end, in process, on real PostgreSQL and SQLite:
every supported pair, idempotence, corruption, tenant isolation, --dry-run."""

from __future__ import annotations

import json
import sqlite3
from pathlib import Path

import psycopg
import pytest

from gochatd.cli.program import main
from gochatd.migrate.canonical import Row, canonical_bytes
from gochatd.migrate.tables import (
    BACKGROUND_JOBS,
    GLOBAL_TABLES,
    REPLY_OUTBOX,
    TENANT_TABLES,
)
from tests.migrate.support import (
    STATUSES,
    file_url,
    global_rows,
    job_rows,
    migrated,
    open_db,
    outbox_rows,
    read_all,
    seed,
)

PAIRS = ["sqlite->postgres", "postgres->postgres", "postgres->sqlite"]


@pytest.fixture(params=PAIRS)
def pair(request: pytest.FixtureRequest, tmp_path: Path) -> tuple[str, str]:
    src_kind, dst_kind = request.param.split("->")
    if src_kind == "sqlite":
        source = migrated(file_url(tmp_path / "source.db"))
    else:
        source = str(request.getfixturevalue("pg_source"))
    if dst_kind == "sqlite":
        destination = file_url(tmp_path / "destination.db")
    else:
        destination = str(request.getfixturevalue("pg_scratch"))
    return source, destination


def canon(rows: list[Row]) -> list[bytes]:
    return [canonical_bytes(r) for r in rows]


def run(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, str, str]:
    code = main(["migrate", *argv])
    out, err = capsys.readouterr()
    return code, out, err


def _report(path: Path) -> dict[str, object]:
    return json.loads(path.read_text("utf-8"))  # type: ignore[no-any-return]


def _checksums(report: dict[str, object]) -> dict[tuple[str, str], tuple[int, str]]:
    out = {}
    for scope in report["scopes"]:  # type: ignore[attr-defined]
        for name, entry in scope["tables"].items():
            out[(scope["scope"], name)] = (entry["destination"]["count"],
                                           entry["destination"]["sha256"])
    return out


def test_round_trip_copies_every_row_exactly_and_twice_is_idempotent(
    pair: tuple[str, str], capsys: pytest.CaptureFixture[str], tmp_path: Path,
) -> None:
    source, destination = pair
    seed(source, tenants={"acme": 30, "béta": 12})
    code, out, err = run(capsys, "copy", "--from", source, "--to", destination, "--all",
                         "--migrate-destination", "--batch-size", "7")
    assert code == 0, err
    assert "applied to the destination" in err

    for tenant, count in (("acme", 30), ("béta", 12)):
        jobs = read_all(destination, BACKGROUND_JOBS, tenant)
        assert canon(jobs) == canon(read_all(source, BACKGROUND_JOBS, tenant))
        first = 1 if tenant == "acme" else 41
        # values, microseconds, unicode, big numbers, booleans: as seeded
        assert canon(jobs) == canon(job_rows(tenant, first, count))
        assert {j["status"] for j in jobs} == set(STATUSES)
        assert canon(read_all(destination, REPLY_OUTBOX, tenant)) == \
            canon(outbox_rows(tenant, first, 4, first))
    for table, rows in global_rows().items():
        assert canon(read_all(destination, table, None)) == \
            canon(sorted(rows, key=lambda r: str(r[table.key]).encode()))

    first_report, second_report = tmp_path / "v1.json", tmp_path / "v2.json"
    code, out, err = run(capsys, "validate", "--from", source, "--to", destination, "--all",
                         "--report", str(first_report))
    assert code == 0, err
    assert "DIFFERENT" not in out
    code, _, err = run(capsys, "copy", "--from", source, "--to", destination, "--all")
    assert code == 0, err
    code, _, err = run(capsys, "validate", "--from", source, "--to", destination, "--all",
                       "--report", str(second_report))
    assert code == 0, err
    sums = _checksums(_report(first_report))
    assert sums == _checksums(_report(second_report))
    assert sums[("acme", "background_jobs")][0] == 30
    assert sums[("", "gochatd_queue_pauses")][0] == 2

    # New inserts on the destination get ids past every copied id (sequence advanced).
    dst = open_db(destination, "destination")
    try:
        new_id = dst.fetch("INSERT INTO background_jobs (tenant_id, job_type, payload) "
                           "VALUES ('acme', 'x', '{}') RETURNING id")[0][0]
        assert new_id > 41 + 12 - 1
    finally:
        dst.close()


def test_a_corrupted_destination_row_fails_validate_naming_its_key_only(
    pg_source: str, pg_scratch: str, capsys: pytest.CaptureFixture[str], tmp_path: Path,
) -> None:
    seed(pg_source, tenants={"acme": 20})
    code, _, err = run(capsys, "copy", "--from", pg_source, "--to", pg_scratch,
                       "--tenants", "acme", "--migrate-destination")
    assert code == 0, err
    with psycopg.connect(pg_scratch, autocommit=True) as conn:
        conn.execute("UPDATE background_jobs SET payload = '{\"secret\": \"hunter2\"}' "
                     "WHERE id = 13")
        conn.execute("DELETE FROM reply_outbox WHERE id = 2")
    report_path = tmp_path / "report.json"
    code, out, err = run(capsys, "validate", "--from", pg_source, "--to", pg_scratch,
                         "--tenants", "acme", "--report", str(report_path))
    assert code == 3
    assert "2 table(s) differ" in err.strip().splitlines()[-1]
    report = _report(report_path)
    tables = report["scopes"][0]["tables"]  # type: ignore[index]
    assert tables["background_jobs"]["first_differing_keys"] == {"id": [13]}
    assert tables["reply_outbox"]["first_differing_keys"] == {"id": [2]}
    assert tables["reply_outbox"]["destination"]["count"] == 3
    text = report_path.read_text("utf-8") + out + err
    assert "hunter2" not in text and "secret" not in text and "réponse" not in text


def test_copying_one_tenant_never_touches_another_on_either_side(
    tmp_path: Path, pg_scratch: str, capsys: pytest.CaptureFixture[str],
) -> None:
    source = migrated(file_url(tmp_path / "source.db"))
    seed(source, tenants={"a": 15, "b": 9})
    # The destination already holds tenant b's own, different rows and the fleet tables.
    migrated(pg_scratch)
    dst = open_db(pg_scratch, "destination")
    dst.write_batch(BACKGROUND_JOBS, job_rows("b", 500, 3))
    dst.close()
    source_b = [read_all(source, t, "b") for t in TENANT_TABLES]
    code, _out, err = run(capsys, "copy", "--from", source, "--to", pg_scratch,
                         "--tenants", "a")
    assert code == 0, err
    assert "fleet-wide" in err and "--all" in err  # says the global tables did not move
    assert canon(read_all(pg_scratch, BACKGROUND_JOBS, "b")) == canon(job_rows("b", 500, 3))
    for table in TENANT_TABLES[1:]:  # replies, edges, batches
        assert read_all(pg_scratch, table, "b") == []
    assert [canon(read_all(source, t, "b")) for t in TENANT_TABLES] == \
        [canon(rows) for rows in source_b]
    for table in GLOBAL_TABLES:
        assert read_all(pg_scratch, table, None) == []
    assert [len(read_all(pg_scratch, t, "a")) for t in TENANT_TABLES] == [15, 4, 4, 4]
    code, _, err = run(capsys, "validate", "--from", source, "--to", pg_scratch,
                       "--tenants", "a")
    assert code == 0, err
    code, _, _ = run(capsys, "validate", "--from", source, "--to", pg_scratch, "--tenants", "b")
    assert code == 3


def test_dry_run_writes_nothing_anywhere(
    tmp_path: Path, pg_scratch: str, capsys: pytest.CaptureFixture[str],
) -> None:
    source_path = tmp_path / "source.db"
    source = migrated(file_url(source_path))
    seed(source, tenants={"a": 25})
    with sqlite3.connect(source_path) as conn:  # an older source: no migration state table
        conn.execute("DROP TABLE gochatd_migrations")
        conn.execute("DELETE FROM gochatd_schema_migrations WHERE version = 6")
    before = source_path.read_bytes()
    missing = tmp_path / "never.db"
    for destination in (pg_scratch, file_url(missing)):
        code, out, err = run(capsys, "copy", "--from", source, "--to", destination, "--all",
                             "--dry-run")
        assert code == 0, err
        assert "would copy 25 rows" in out and "would apply migrations" in err
    assert source_path.read_bytes() == before
    assert not missing.exists()
    with psycopg.connect(pg_scratch) as conn:
        assert conn.execute("SELECT count(*) FROM pg_tables WHERE schemaname = 'public'"
                            ).fetchone() == (0,)


def test_plan_prints_counts_per_tenant_and_table(
    pg_source: str, tmp_path: Path, capsys: pytest.CaptureFixture[str],
) -> None:
    seed(pg_source, tenants={"a": 5, "b": 2})
    code, out, err = run(capsys, "plan", "--from", pg_source,
                         "--to", file_url(tmp_path / "d.db"))
    assert code == 0, err
    lines = [line.split() for line in out.splitlines()[1:]]
    assert ["a", "background_jobs", "5", "-"] in lines
    assert ["b", "reply_outbox", "4", "-"] in lines
    assert ["a", "gochatd_job_dependencies", "4", "-"] in lines
    assert ["b", "gochatd_batches", "4", "-"] in lines
    assert ["(fleet-wide)", "gochatd_queue_pauses", "2", "-"] in lines
    assert not (tmp_path / "d.db").exists()
