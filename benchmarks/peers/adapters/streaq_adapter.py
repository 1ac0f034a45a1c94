"""streaq on Redis DB 14: ``streaq run ... --workers 2``, concurrency 32, asyncio + uvloop.

streaq's docs ("Worker optimization") recommend uvloop and coredis' optimized mode; its own
benchmarks use concurrency 32. The task is ``silent=True`` (no two INFO lines per task).
streaq loads a server-wide Redis *Function* library named ``streaq`` (not per database).
Override with PEERS_STREAQ_PROCS / PEERS_STREAQ_CONCURRENCY / PEERS_STREAQ_BACKEND (trio).
"""

from __future__ import annotations

import os
import sys
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager

import coredis
from streaq import Worker

from benchmarks.peers.adapters import contract

coredis.Config.optimized = True

URL = contract.redis_url(14)
PROCS = int(os.environ.get("PEERS_STREAQ_PROCS", "2"))
CONCURRENCY = int(os.environ.get("PEERS_STREAQ_CONCURRENCY", "32"))
BACKEND = os.environ.get("PEERS_STREAQ_BACKEND", "asyncio")
UVLOOP = BACKEND == "asyncio"

worker = Worker(redis_url=URL, concurrency=CONCURRENCY, queue_name="bench", anyio_backend=BACKEND,
                anyio_kwargs={"use_uvloop": True} if UVLOOP else {})


@worker.task(silent=True)
async def noop(idx: int, t_enq: float, phase: int) -> None:
    contract.record_start(idx, t_enq, phase)


class StreaqAdapter:
    name = "streaq"
    backend = "asyncio"

    def describe(self) -> dict[str, str]:
        return {
            "system": "streaq",
            "version": f"{contract.version_of('streaq')} (coredis {contract.version_of('coredis')})",
            "workers": f"`streaq run {__spec__.name}:worker --workers {PROCS}`, concurrency={CONCURRENCY}, "
                       f"prefetch=concurrency, anyio backend {BACKEND}{' + uvloop' if UVLOOP else ''}, "
                       "coredis optimized mode, silent task, default max_tries and result ttl",
            "producer": "`await task.enqueue(...)` inside `async with worker`",
            "durability": "Redis DB 14 (the server's own persistence settings); XACK after the task",
        }

    def reset(self) -> None:
        contract.flush_redis_db(URL)

    @asynccontextmanager
    async def producer(self) -> AsyncIterator[contract.EnqueueAsync]:
        async with worker:
            async def enqueue_one(idx: int, t_enq: float, phase: int) -> None:
                await noop.enqueue(idx=idx, t_enq=t_enq, phase=phase)

            yield enqueue_one

    def worker_commands(self) -> list[list[str]]:
        return [[contract.bin_path("streaq"), "run", f"{__spec__.name}:worker", "--workers", str(PROCS)]]


if __name__ == "__main__":
    sys.exit(contract.main(StreaqAdapter()))
