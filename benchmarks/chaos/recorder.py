"""The handlers' side channel: one ``chaos_executions`` row per execution, written straight
to PostgreSQL (``CHAOS_RECORD_URL``, the superuser, not through the fault proxy), so what
the runner reads is what really ran, even while the daemon's own connections are cut.

``db_started_at`` is the database's clock at the same moment (the row's default), and
``seen`` what a workflow handler (``chaos:flow``) read of its dependencies.

Times are the real wall clock of this host, captured before a clock-skew scenario patches
``time.time`` in the daemon process. One connection per process, guarded by a lock;
a failed write reconnects and retries until ``RETRY_FOR_S`` (PostgreSQL restarts).
"""

from __future__ import annotations

import threading
import time
import uuid
from collections.abc import Callable
from typing import Any

import psycopg
from psycopg.types.json import Jsonb

RETRY_FOR_S = 90.0

EXECUTIONS_TABLE = """
CREATE TABLE IF NOT EXISTS chaos_executions (
    id bigserial PRIMARY KEY,
    job_id bigint NOT NULL,
    fence bigint NOT NULL,
    attempt integer NOT NULL,
    pid integer NOT NULL,
    worker text NOT NULL,
    started_at double precision NOT NULL,
    ended_at double precision,
    outcome text,
    token text NOT NULL UNIQUE,
    -- the database clock at the start (the workflow invariant compares it with members'
    -- completed_at / failed_at), and what a workflow handler saw of its dependencies
    db_started_at double precision NOT NULL DEFAULT extract(epoch FROM clock_timestamp()),
    seen jsonb
)"""


class Recorder:
    def __init__(self, url: str, worker: str, clock: Callable[[], float]) -> None:
        self.url = url
        self.worker = worker
        self.clock = clock
        self._lock = threading.Lock()
        self._conn: psycopg.Connection[Any] | None = None

    def _execute(self, sql: str, params: tuple[Any, ...]) -> list[tuple[Any, ...]]:
        deadline = time.monotonic() + RETRY_FOR_S
        with self._lock:
            while True:
                try:
                    if self._conn is None or self._conn.closed:
                        self._conn = psycopg.connect(self.url, autocommit=True, connect_timeout=3)
                    cur = self._conn.execute(sql, params)
                    return list(cur.fetchall()) if cur.description else []
                except psycopg.Error:
                    if self._conn is not None:
                        self._conn.close()
                    self._conn = None
                    if time.monotonic() >= deadline:
                        raise
                    time.sleep(0.1)  # PostgreSQL restarting: try again shortly

    def started(self, job_id: int, fence: int, attempt: int, pid: int) -> int:
        # The token makes a retried INSERT (its first try may have committed just before
        # the connection died) idempotent, while two real executions stay two rows.
        token = uuid.uuid4().hex
        params = (job_id, fence, attempt, pid, self.worker, self.clock(), token)
        rows = self._execute(
            "INSERT INTO chaos_executions"
            " (job_id, fence, attempt, pid, worker, started_at, token)"
            " VALUES (%s, %s, %s, %s, %s, %s, %s) ON CONFLICT (token) DO NOTHING RETURNING id",
            params,
        )
        if not rows:
            rows = self._execute("SELECT id FROM chaos_executions WHERE token = %s", (token,))
        return int(rows[0][0])

    def ended(self, row_id: int, outcome: str) -> None:
        self._execute(
            "UPDATE chaos_executions SET ended_at = %s, outcome = %s WHERE id = %s",
            (self.clock(), outcome, row_id),
        )

    def saw(self, row_id: int, seen: list[Any]) -> None:
        """What a workflow handler read of its dependencies: [[job id, status, result], ...]."""
        self._execute("UPDATE chaos_executions SET seen = %s WHERE id = %s", (Jsonb(seen), row_id))
