"""Seeding and reading databases for migrate tests: neutral rows in, neutral rows out."""

from __future__ import annotations

import os
import signal
import subprocess
import time
from collections.abc import Callable
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

from gochatd.migrate.backends import Database, parse_endpoint
from gochatd.migrate.canonical import Row
from gochatd.migrate.catch_up import START_PHASE
from gochatd.migrate.changes import safe_horizon
from gochatd.migrate.route_control import prepare_tracking
from gochatd.migrate.schema import upgrade
from gochatd.migrate.state import DONE, DatabaseStateStore
from gochatd.migrate.tables import (
    BACKGROUND_JOBS,
    BATCHES,
    JOB_DEPENDENCIES,
    PERIODIC_SLOTS,
    QUEUE_PAUSES,
    REPLY_OUTBOX,
    Table,
)

T0 = datetime(2026, 3, 4, 5, 6, 7, 123456, tzinfo=UTC)
STATUSES = ("queued", "running", "retrying", "completed", "dead", "cancelled")
#: Payload values whose representations differ between jsonb and SQLite JSON text.
TRICKY_PAYLOAD: dict[str, Any] = {
    "text": "héllo 🌍 中文 \"quoted\" \\ back",
    "nested": {"a": [1, 2, {"b": None, "c": [True, False]}], "z": {}},
    "big": 2**70, "neg": -12345678901234567, "huge_float": 1.5e300, "tenth": 0.1,
    "integral_float": 3.0, "list": [[], [[]], ""],
}


def open_db(url: str, role: str = "source") -> Database:
    return Database(parse_endpoint(role, url))


def migrated(url: str) -> str:
    db = open_db(url)
    upgrade(db)
    db.close()
    return url


def job_rows(tenant: str, first_id: int, count: int) -> list[Row]:
    rows = []
    for i in range(count):
        job_id = first_id + i
        status = STATUSES[i % len(STATUSES)]
        at = T0 + timedelta(seconds=i, microseconds=i * 7)
        rows.append({
            "id": job_id, "tenant_id": tenant, "job_type": f"type.{i % 3}",
            "queue": "default" if i % 2 else "mail", "status": status,
            "payload": {**TRICKY_PAYLOAD, "i": i} if i % 5 == 0 else {"i": i},
            "priority": i % 4 - 1, "attempts": i % 3, "max_attempts": 25,
            "scheduled_at": at, "idempotency_key": f"key-{tenant}-{i}" if i % 2 else None,
            "locked_by": "w1" if status == "running" else None,
            "locked_at": at if status == "running" else None,
            "last_error": "Boom: failed" if status in ("dead", "retrying") else None,
            "error_class": "Boom" if status in ("dead", "retrying") else None,
            "failed_at": at if status == "dead" else None,
            "completed_at": at if status == "completed" else None,
            "created_at": at, "updated_at": at + timedelta(microseconds=1),
            "fence": i % 7, "lease_expires_at": at if status == "running" else None,
            "dispatched_at": at if i % 3 == 0 else None,
            "traceparent": "00-" + "a" * 32 + "-" + "b" * 16 + "-01" if i % 4 == 0 else None,
            "cancel_requested": status == "running" and i % 2 == 0,
            "unique_key": f"unique-{tenant}-{job_id}" if i % 6 == 0 else None,  # moved too
            "unique_until": at + timedelta(hours=1) if i % 6 == 0 else None,
            # A bare JSON string too: jsonb hands it back as text, which must not be parsed
            # twice (migrate/backends.py).
            "result": (("a bare string" if i % 2 else {"i": i, "é": [1.5, None]})
                       if status == "completed" else None),
            # Workflows (docs/workflows.md): a job's place in one moves with it.
            "waits_on": 2 if status == "queued" and i % 4 == 0 else 0,
            "has_dependents": i % 5 == 0, "batch_id": 1000 + i if i % 4 == 0 else None,
        })
    return rows


def outbox_rows(tenant: str, first_id: int, count: int, job_id: int) -> list[Row]:
    return [{
        "id": first_id + i, "tenant_id": tenant, "job_id": job_id, "channel": "webhook",
        "recipient": f"user-{i}", "body": {"text": f"réponse {i} 🎉", "n": [i, 2.5]},
        "dedupe_key": f"{tenant}-reply-{i}", "status": ("pending", "sending", "sent", "dead")[i % 4],
        "attempts": i % 2, "next_attempt_at": T0 + timedelta(microseconds=999_999 - i),
        "lease_owner": "w2" if i % 4 == 1 else None,
        "lease_expires_at": T0 if i % 4 == 1 else None,
        "provider_message_id": f"pm-{i}" if i % 4 == 2 else None,
        "error_class": "HTTP500" if i % 4 == 3 else None,
        "created_at": T0, "updated_at": T0, "sent_at": T0 if i % 4 == 2 else None,
    } for i in range(count)]


def dependency_rows(tenant: str, first_id: int, count: int, first_job: int,
                    jobs: int) -> list[Row]:
    """Edges (docs/workflows.md), open or resolved either way, some run_if_failed: the
    dependents are ids just past the tenant's ``jobs`` (seed leaves 10 free), each waiting
    on job first_job + 5k (k >= 1: one job_rows gave dependents, and none the tests change
    by hand, whose status changes would resolve them)."""
    return [{
        "id": first_id + i, "tenant_id": tenant, "job_id": first_job + jobs + i,
        "depends_on_id": first_job + 5 * (i + 1), "run_if_failed": i % 2 == 1,
        "resolved_status": (None, "completed", "dead", "cancelled")[i % 4],
    } for i in range(count)]


def batch_rows(tenant: str, first_id: int, count: int, first_job: int) -> list[Row]:
    """Batches, with and without their callbacks."""
    return [{
        "id": first_id + i, "tenant_id": tenant, "size": i + 2,
        "on_success_id": first_job + i if i % 2 == 0 else None,
        "on_complete_id": first_job + i + 1 if i % 3 != 2 else None,
        "created_at": T0 + timedelta(microseconds=i * 13),
    } for i in range(count)]


def global_rows() -> dict[Table, list[Row]]:
    return {
        QUEUE_PAUSES: [
            {"queue": "mail", "paused_at": T0, "paused_by": "ops"},
            {"queue": "Zeta-1", "paused_at": T0 + timedelta(microseconds=5), "paused_by": ""},
        ],
        PERIODIC_SLOTS: [
            {"name": "nightly.report", "last_slot": T0, "updated_at": T0},
            {"name": "Ünicode.job", "last_slot": T0 + timedelta(hours=1), "updated_at": T0},
        ],
    }


def seed(url: str, *, tenants: dict[str, int], outbox: int = 4,
         fleet: bool = True) -> None:
    """``tenants``: name -> job count. Ids are disjoint across tenants."""
    db = open_db(url)
    try:
        next_id = 1
        for tenant, count in tenants.items():
            db.write_batch(BACKGROUND_JOBS, job_rows(tenant, next_id, count))
            db.write_batch(REPLY_OUTBOX, outbox_rows(tenant, next_id, outbox, next_id))
            db.write_batch(JOB_DEPENDENCIES,
                           dependency_rows(tenant, next_id, outbox, next_id, count))
            db.write_batch(BATCHES, batch_rows(tenant, next_id, outbox, next_id))
            next_id += count + 10
        if fleet:
            for table, rows in global_rows().items():
                db.write_batch(table, rows)
    finally:
        db.close()


def read_all(url: str, table: Table, tenant: str | None) -> list[Row]:
    db = open_db(url)
    try:
        return db.read_batch(table, tenant, table.first_key, 10**9)
    finally:
        db.close()


def file_url(path: Path) -> str:
    return f"sqlite:///{path}"


def destination_label(url: str) -> str:
    """The label the migrator records a destination's state under."""
    return parse_endpoint("destination", url).masked


def record_start(source_url: str, destination_url: str, scopes: list[str]) -> int:
    """What ``gochatd migrate start`` does (its route and barrier aside): change tracking
    installed in both databases, and the source's safe horizon as each scope's start
    watermark."""
    db = open_db(source_url)
    destination = open_db(destination_url, "destination")
    try:
        upgrade(destination)  # start makes the destination ready first
        prepare_tracking(db)
        prepare_tracking(destination)
        watermark = safe_horizon(db)
        state = DatabaseStateStore(db)
        for scope in scopes:
            state.put(scope, START_PHASE, destination_label(destination_url), DONE,
                      {"watermark": watermark})
        return watermark
    finally:
        db.close()
        destination.close()


def kill_on_progress(argv: list[str], probe: Callable[[], tuple[str, int] | None], *,
                     timeout_s: float, what: str) -> tuple[str, int] | None:
    """Run the migrator, SIGKILL it as soon as ``probe`` (the recorded state: status and a
    position) shows progress, and return the last reading. Polls with a deadline."""
    proc = subprocess.Popen(argv, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    progress = None
    try:
        deadline = time.monotonic() + timeout_s
        while time.monotonic() < deadline:
            progress = probe()
            if progress is not None and progress[1] > 0:
                break
            assert proc.poll() is None, f"the {what} ended before any progress was seen"
            time.sleep(0.005)
        os.kill(proc.pid, signal.SIGKILL)
        proc.wait(timeout=10)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    return progress
