"""pgqueuer's side of ``--scenario budget`` (run with the peers' venv, which has pgqueuer):
the factory ``pgq run benchmarks.bench.budget_pgq:create_pgqueuer`` calls, with the same
no-op handler as gochatd's (budget_handlers.record_start), on ``$BUDGET_PG_DSN``. The
workers are the peers harness's: one asyncpg connection per process, ``--batch-size 50``."""

from __future__ import annotations

import os
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager

import asyncpg
from pgqueuer import AsyncpgDriver, PgQueuer
from pgqueuer.models import Job

from benchmarks.bench.budget_handlers import record_start


@asynccontextmanager
async def create_pgqueuer() -> AsyncIterator[PgQueuer]:
    conn = await asyncpg.connect(os.environ["BUDGET_PG_DSN"])
    pgq = PgQueuer(AsyncpgDriver(conn))

    async def budget(job: Job) -> None:
        record_start(int(job.id))

    pgq.entrypoint("budget")(budget)  # called, not applied as a decorator: pgqueuer is
    # untyped where mypy runs (the dev venv lacks it), and an untyped decorator is an error
    try:
        yield pgq
    finally:
        await conn.close()
