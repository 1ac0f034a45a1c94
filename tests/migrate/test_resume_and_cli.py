"""A migrator killed with SIGKILL mid-copy resumes from its recorded position; ``status``
shows the phases; bad input exits 2 with one line on stderr and no traceback."""

from __future__ import annotations

import json
import sqlite3
import subprocess
import sys
from pathlib import Path

import pytest

from gochatd.cli.program import main
from gochatd.migrate.tables import BACKGROUND_JOBS
from tests.migrate.support import file_url, kill_on_progress, migrated, open_db, seed

GOCHATD = str(Path(sys.executable).with_name("gochatd"))
ROWS = 20_000


def _copy_progress(db_path: Path) -> tuple[str, int] | None:
    conn = sqlite3.connect(db_path, timeout=5)
    try:
        row = conn.execute("SELECT status, report FROM gochatd_migrations "
                           "WHERE tenant_id = 'a' AND phase = 'copy'").fetchone()
    finally:
        conn.close()
    if row is None:
        return None
    entry = json.loads(row[1]).get("tables", {}).get("background_jobs", {})
    return row[0], int(entry.get("last_key", 0))


def test_copy_killed_with_sigkill_resumes_where_it_stopped_and_validates_equal(
    tmp_path: Path, pg_scratch: str,
) -> None:
    source_path = tmp_path / "source.db"
    source = migrated(file_url(source_path))
    seed(source, tenants={"a": ROWS}, fleet=False)
    migrated(pg_scratch)
    argv = [GOCHATD, "migrate", "copy", "--from", source, "--to", pg_scratch,
            "--tenants", "a", "--batch-size", "100"]
    progress = kill_on_progress(argv, lambda: _copy_progress(source_path), timeout_s=20,
                                what="copy")
    assert progress is not None and progress[0] == "running", progress
    status, killed_at = _copy_progress(source_path)  # type: ignore[misc]
    assert status == "running" and 0 < killed_at < ROWS
    dst = open_db(pg_scratch, "destination")
    try:
        partial = dst.count(BACKGROUND_JOBS, "a")
    finally:
        dst.close()
    assert killed_at <= partial < ROWS  # at most one batch beyond the recorded key

    report = tmp_path / "resume.json"
    done = subprocess.run([*argv, "--report", str(report)], capture_output=True, text=True,
                          timeout=60)
    assert done.returncode == 0, done.stderr
    scope = json.loads(report.read_text())["scopes"][0]
    entry = scope["tables"]["background_jobs"]
    assert scope["resumed"] is True
    assert entry["resumed_from"] == killed_at
    assert entry["copied_this_run"] == ROWS - killed_at
    assert entry["rows"] == ROWS and entry["last_key"] == ROWS
    assert _copy_progress(source_path) == ("done", ROWS)

    check = subprocess.run([GOCHATD, "migrate", "validate", "--from", source, "--to",
                            pg_scratch, "--tenants", "a"], capture_output=True, text=True,
                           timeout=60)
    assert check.returncode == 0, check.stderr
    assert f"{ROWS:>10} {ROWS:>10} equal" in check.stdout
    status_out = subprocess.run([GOCHATD, "migrate", "status", "--from", source],
                                capture_output=True, text=True, timeout=30).stdout
    assert "copy" in status_out and "done" in status_out and f"background_jobs={ROWS}" in \
        status_out
    assert "validate" in status_out


@pytest.fixture
def seeded_sqlite(tmp_path: Path) -> str:
    url = migrated(file_url(tmp_path / "s.db"))
    seed(url, tenants={"a": 2}, fleet=False)
    return url


def _bad_cases(source: str, tmp: Path) -> list[tuple[list[str], str]]:
    pg = "postgresql://alice:s3cr3tpw@127.0.0.1:1/nope"
    return [
        (["copy", "--from", "mysql://x/y", "--to", source, "--all"], "scheme"),
        (["copy", "--from", source, "--to", source, "--all"], "same database"),
        (["copy", "--from", source, "--to", f"sqlite:///{tmp}/../{tmp.name}/s.db", "--all"],
         "same database"),
        (["copy", "--from", source, "--to", file_url(tmp / "d.db"), "--tenants", "zzz"],
         "unknown tenant 'zzz'"),
        (["copy", "--from", source, "--to", file_url(tmp / "d.db"), "--tenants", "a,,b"],
         "empty tenant"),
        (["copy", "--from", source, "--to", file_url(tmp / "d.db"), "--all"],
         "--upgrade-destination"),
        (["copy", "--from", source, "--to", pg, "--all"], "cannot open the destination"),
        (["plan", "--from", pg, "--to", source], "cannot open the source"),
        (["copy", "--from", file_url(tmp / "missing.db"), "--to", pg, "--all"],
         "no such file"),
        (["copy", "--from", source, "--to", file_url(tmp / "d.db")], "--tenants"),
        (["copy", "--from", source, "--to", file_url(tmp / "d.db"), "--all",
          "--tenants", "a"], "not allowed"),
        (["copy", "--from", source, "--to", file_url(tmp / "d.db"), "--all",
          "--batch-size", "0"], "batch size"),
        (["validate", "--from", source, "--to", file_url(tmp / "d.db"), "--all"],
         "no up-to-date gochatd schema"),
        (["copy", "--from", source, "--to", "sqlite://", "--all"], "needs a file path"),
        (["status"], "--from"),
    ]


def test_bad_input_exits_2_with_one_line_and_never_prints_a_password(
    seeded_sqlite: str, tmp_path: Path, capsys: pytest.CaptureFixture[str],
) -> None:
    for argv, expected in _bad_cases(seeded_sqlite, tmp_path):
        code = main(["migrate", *argv])
        out, err = capsys.readouterr()
        assert code == 2, (argv, err)
        lines = err.strip().splitlines()
        assert len(lines) == 1 and lines[0].startswith("gochatd: "), (argv, err)
        assert expected in lines[0], (argv, lines[0])
        assert "Traceback" not in err and "s3cr3tpw" not in err + out
    assert not (tmp_path / "d.db").exists()


def test_bad_input_in_a_real_process_is_one_line_too(seeded_sqlite: str) -> None:
    done = subprocess.run([GOCHATD, "migrate", "plan", "--from", seeded_sqlite, "--to",
                           "postgresql://bob:hunter2@127.0.0.1:1/x"],
                          capture_output=True, text=True, timeout=30)
    assert done.returncode == 2
    assert len(done.stderr.strip().splitlines()) == 1
    assert "hunter2" not in done.stderr and "bob:***@" in done.stderr
