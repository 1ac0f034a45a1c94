"""saq on Redis DB 10: ``saq ... --workers 2``, concurrency 10 per process (saq's default).

One worker process per core, as saq's README suggests. Override with PEERS_SAQ_PROCS /
PEERS_SAQ_CONCURRENCY.
"""

from __future__ import annotations

import os
import sys
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any

from saq import Queue

from benchmarks.peers.adapters import contract

URL = contract.redis_url(10)
PROCS = int(os.environ.get("PEERS_SAQ_PROCS", "2"))
CONCURRENCY = int(os.environ.get("PEERS_SAQ_CONCURRENCY", "10"))


async def noop(ctx: dict[str, Any], *, idx: int, t_enq: float, phase: int) -> None:
    contract.record_start(idx, t_enq, phase)


settings = {"queue": Queue.from_url(URL, name="bench"), "functions": [noop], "concurrency": CONCURRENCY}


class SaqAdapter:
    name = "saq"
    backend = "asyncio"

    def describe(self) -> dict[str, str]:
        return {
            "system": "saq",
            "version": contract.version_of("saq"),
            "workers": f"`saq {__spec__.name}.settings --workers {PROCS} --quiet`, concurrency={CONCURRENCY} "
                       "per process, async handler, default job retention",
            "producer": "`Queue.enqueue()`",
            "durability": "Redis DB 10 (the server's own persistence settings)",
        }

    def reset(self) -> None:
        contract.flush_redis_db(URL)

    @asynccontextmanager
    async def producer(self) -> AsyncIterator[contract.EnqueueAsync]:
        queue = Queue.from_url(URL, name="bench")
        await queue.connect()
        try:
            async def enqueue_one(idx: int, t_enq: float, phase: int) -> None:
                await queue.enqueue("noop", idx=idx, t_enq=t_enq, phase=phase)

            yield enqueue_one
        finally:
            await queue.disconnect()

    def worker_commands(self) -> list[list[str]]:
        return [[contract.bin_path("saq"), f"{__spec__.name}.settings", "--workers", str(PROCS), "--quiet"]]


if __name__ == "__main__":
    sys.exit(contract.main(SaqAdapter()))
