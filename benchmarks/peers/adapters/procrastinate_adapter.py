"""procrastinate on PostgreSQL ``bench_procrastinate``: 2 x ``procrastinate worker --concurrency 50``.

LISTEN/NOTIFY on (5 s polling fallback), ``delete_jobs=never``. procrastinate's default
concurrency is 1; 2 x 50 was the best setting in the reference sweep. The database keeps the
server defaults (fsync=on, synchronous_commit=on). Override with PEERS_PROCRASTINATE_PROCS /
PEERS_PROCRASTINATE_CONCURRENCY.
"""

from __future__ import annotations

import os
import subprocess
import sys
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager

from procrastinate import App, PsycopgConnector

from benchmarks.peers.adapters import contract

DATABASE = "bench_procrastinate"
PROCS = int(os.environ.get("PEERS_PROCRASTINATE_PROCS", "2"))
CONCURRENCY = int(os.environ.get("PEERS_PROCRASTINATE_CONCURRENCY", "50"))

app = App(connector=PsycopgConnector(conninfo=f"{contract.PG_SERVER}/{DATABASE}"))


@app.task(name="noop", queue="bench")
async def noop(idx: int, t_enq: float, phase: int) -> None:
    contract.record_start(idx, t_enq, phase)


class ProcrastinateAdapter:
    name = "procrastinate"
    backend = "asyncio"

    def _worker_argv(self) -> list[str]:
        return ["--app", f"{__spec__.name}.app", "--log-level", "warning", "worker",
                "--concurrency", str(CONCURRENCY), "--queues", "bench"]

    def describe(self) -> dict[str, str]:
        return {
            "system": "procrastinate",
            "version": contract.version_of("procrastinate"),
            "workers": f"{PROCS} x `procrastinate " + " ".join(self._worker_argv()) + "`, LISTEN/NOTIFY, "
                       "delete_jobs=never, async task",
            "producer": "`await task.defer_async(...)` (one committed INSERT per job)",
            "durability": f"PostgreSQL `{DATABASE}`, server defaults (fsync=on, synchronous_commit=on)",
        }

    def reset(self) -> None:
        contract.recreate_database(DATABASE)
        subprocess.run([contract.bin_path("procrastinate"), "--app", f"{__spec__.name}.app", "schema",
                        "--apply"], check=True, stdout=subprocess.DEVNULL)

    @asynccontextmanager
    async def producer(self) -> AsyncIterator[contract.EnqueueAsync]:
        async with app.open_async():
            async def enqueue_one(idx: int, t_enq: float, phase: int) -> None:
                await noop.defer_async(idx=idx, t_enq=t_enq, phase=phase)

            yield enqueue_one

    def worker_commands(self) -> list[list[str]]:
        return [[contract.bin_path("procrastinate"), *self._worker_argv()]] * PROCS


if __name__ == "__main__":
    sys.exit(contract.main(ProcrastinateAdapter()))
