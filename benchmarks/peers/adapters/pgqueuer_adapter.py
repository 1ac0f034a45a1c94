"""pgqueuer on PostgreSQL ``bench_pgqueuer``: 2 x ``pgq run ... --batch-size 50``.

pgqueuer's tuning guide says to raise ``batch_size`` for short jobs, to run ``pgq autovac``
and to give the QueueManager one asyncpg connection (not a pool); ``pgq run`` runs on uvloop.
The database keeps the server defaults (fsync=on, synchronous_commit=on), tables durable.
The producer uses an asyncpg pool of 8 (``AsyncpgPoolDriver``), because 8 concurrent producer
tasks cannot share one asyncpg connection. Override with PEERS_PGQUEUER_PROCS /
PEERS_PGQUEUER_BATCH_SIZE.
"""

from __future__ import annotations

import os
import subprocess
import sys
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager

import asyncpg
from pgqueuer import AsyncpgDriver, AsyncpgPoolDriver, PgQueuer, Queries
from pgqueuer.models import Job

from benchmarks.peers.adapters import contract

DATABASE = "bench_pgqueuer"
DSN = f"{contract.PG_SERVER}/{DATABASE}"
PROCS = int(os.environ.get("PEERS_PGQUEUER_PROCS", "2"))
BATCH = int(os.environ.get("PEERS_PGQUEUER_BATCH_SIZE", "50"))


@asynccontextmanager
async def create_pgqueuer() -> AsyncIterator[PgQueuer]:
    """The factory ``pgq run`` calls (pgqueuer 1.6 wants an async context manager)."""
    conn = await asyncpg.connect(DSN)
    pgq = PgQueuer(AsyncpgDriver(conn))

    @pgq.entrypoint("noop")
    async def noop(job: Job) -> None:
        assert job.payload is not None
        idx, t_enq, phase = job.payload.split()
        contract.record_start(int(idx), float(t_enq), int(phase))

    try:
        yield pgq
    finally:
        await conn.close()


class PgqueuerAdapter:
    name = "pgqueuer"
    backend = "asyncio"

    def _run_argv(self) -> list[str]:
        return ["run", f"{__spec__.name}:create_pgqueuer", "--batch-size", str(BATCH),
                "--log-level", "WARNING"]

    def describe(self) -> dict[str, str]:
        return {
            "system": "pgqueuer",
            "version": f"{contract.version_of('pgqueuer')} (asyncpg {contract.version_of('asyncpg')})",
            "workers": f"{PROCS} x `pgq " + " ".join(self._run_argv()) + "`, one asyncpg connection per "
                       "process, LISTEN/NOTIFY, uvloop, `pgq install` + `pgq autovac`, async entrypoint",
            "producer": "`Queries.enqueue(entrypoint, payload)` (one committed INSERT per job)",
            "durability": f"PostgreSQL `{DATABASE}`, server defaults (fsync=on, synchronous_commit=on), "
                          "durable (logged) tables",
        }

    def reset(self) -> None:
        contract.recreate_database(DATABASE)
        pgq = contract.bin_path("pgq")
        subprocess.run([pgq, "--pg-dsn", DSN, "install"], check=True, stdout=subprocess.DEVNULL)
        subprocess.run([pgq, "--pg-dsn", DSN, "autovac"], check=True, stdout=subprocess.DEVNULL)

    @asynccontextmanager
    async def producer(self) -> AsyncIterator[contract.EnqueueAsync]:
        async with asyncpg.create_pool(DSN, min_size=contract.PRODUCERS,
                                       max_size=contract.PRODUCERS) as pool:
            queries = Queries(AsyncpgPoolDriver(pool))

            async def enqueue_one(idx: int, t_enq: float, phase: int) -> None:
                await queries.enqueue("noop", b"%d %.6f %d" % (idx, t_enq, phase))

            yield enqueue_one

    def worker_commands(self) -> list[list[str]]:
        return [[contract.bin_path("pgq"), *self._run_argv()]] * PROCS


if __name__ == "__main__":
    sys.exit(contract.main(PgqueuerAdapter()))
