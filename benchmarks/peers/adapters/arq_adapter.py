"""arq on Redis DB 9: one worker process, ``max_jobs=100``, ``poll_delay=0.01`` s.

arq's defaults (``max_jobs=10``, ``poll_delay=0.5`` s) cap it near 200 jobs/s because it sleeps
``poll_delay`` between polls; two processes fight over the same job ids and were slower than
one in the reference sweep. Override with PEERS_ARQ_PROCS / PEERS_ARQ_MAX_JOBS /
PEERS_ARQ_POLL_DELAY.
"""

from __future__ import annotations

import logging
import os
import sys
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any

from arq import create_pool, run_worker
from arq.connections import RedisSettings

from benchmarks.peers.adapters import contract

URL = contract.redis_url(9)
PROCS = int(os.environ.get("PEERS_ARQ_PROCS", "1"))
MAX_JOBS = int(os.environ.get("PEERS_ARQ_MAX_JOBS", "100"))
POLL_DELAY = float(os.environ.get("PEERS_ARQ_POLL_DELAY", "0.01"))


async def noop(ctx: dict[str, Any], idx: int, t_enq: float, phase: int) -> None:
    contract.record_start(idx, t_enq, phase)


class WorkerSettings:
    functions = [noop]  # arq reads these class attributes
    redis_settings = RedisSettings.from_dsn(URL)
    max_jobs = MAX_JOBS
    poll_delay = POLL_DELAY


class ArqAdapter:
    name = "arq"
    backend = "asyncio"

    def describe(self) -> dict[str, str]:
        return {
            "system": "arq",
            "version": contract.version_of("arq"),
            "workers": f"{PROCS} x arq `run_worker(WorkerSettings)`, max_jobs={MAX_JOBS}, "
                       f"poll_delay={POLL_DELAY}s, keep_result 3600 s (default), async handler",
            "producer": "`ArqRedis.enqueue_job()`",
            "durability": "Redis DB 9 (the server's own persistence settings)",
        }

    def reset(self) -> None:
        contract.flush_redis_db(URL)

    @asynccontextmanager
    async def producer(self) -> AsyncIterator[contract.EnqueueAsync]:
        pool = await create_pool(RedisSettings.from_dsn(URL))
        try:
            async def enqueue_one(idx: int, t_enq: float, phase: int) -> None:
                await pool.enqueue_job("noop", idx, t_enq, phase)

            yield enqueue_one
        finally:
            await pool.aclose()

    def worker_commands(self) -> list[list[str]]:
        return [contract.module_command(__spec__.name, "serve-one")] * PROCS


if __name__ == "__main__":
    if sys.argv[1:] == ["serve-one"]:
        logging.basicConfig(level=logging.WARNING)
        run_worker(WorkerSettings)  # type: ignore[arg-type]
        sys.exit(0)
    sys.exit(contract.main(ArqAdapter()))
