"""taskiq + taskiq-redis ``RedisStreamBroker`` on Redis DB 15: taskiq's worker defaults.

``taskiq worker --workers 2 --max-async-tasks 100 --max-prefetch 0 --ack-type when_saved``
(the defaults, apart from the log level), ``xread_count=100``, no result backend; the worker
XACKs each message after the task ran. Override with PEERS_TASKIQ_PROCS /
PEERS_TASKIQ_MAX_ASYNC.
"""

from __future__ import annotations

import os
import sys
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager

from taskiq_redis import RedisStreamBroker

from benchmarks.peers.adapters import contract

URL = contract.redis_url(15)
PROCS = int(os.environ.get("PEERS_TASKIQ_PROCS", "2"))
MAX_ASYNC = int(os.environ.get("PEERS_TASKIQ_MAX_ASYNC", "100"))

broker = RedisStreamBroker(url=URL, queue_name="bench", xread_count=100)


@broker.task(task_name="noop")
async def noop(idx: int, t_enq: float, phase: int) -> None:
    contract.record_start(idx, t_enq, phase)


class TaskiqAdapter:
    name = "taskiq"
    backend = "asyncio"

    def _argv(self) -> list[str]:
        return ["worker", f"{__spec__.name}:broker", "--workers", str(PROCS), "--max-async-tasks",
                str(MAX_ASYNC), "--max-prefetch", "0", "--ack-type", "when_saved", "--log-level", "WARNING"]

    def describe(self) -> dict[str, str]:
        return {
            "system": "taskiq",
            "version": f"{contract.version_of('taskiq')} "
                       f"(taskiq-redis {contract.version_of('taskiq-redis')})",
            "workers": "`taskiq " + " ".join(self._argv()) + "`, RedisStreamBroker(xread_count=100), "
                       "no result backend, async task",
            "producer": "`await task.kiq(...)` (one XADD per job)",
            "durability": "Redis DB 15 (the server's own persistence settings); XACK after the task",
        }

    def reset(self) -> None:
        contract.flush_redis_db(URL)

    @asynccontextmanager
    async def producer(self) -> AsyncIterator[contract.EnqueueAsync]:
        # startup() creates the consumer group before the first XADD, so a backlog enqueued
        # before any worker runs is still delivered.
        await broker.startup()
        try:
            async def enqueue_one(idx: int, t_enq: float, phase: int) -> None:
                await noop.kiq(idx, t_enq, phase)

            yield enqueue_one
        finally:
            await broker.shutdown()

    def worker_commands(self) -> list[list[str]]:
        return [[contract.bin_path("taskiq"), *self._argv()]]


if __name__ == "__main__":
    sys.exit(contract.main(TaskiqAdapter()))
