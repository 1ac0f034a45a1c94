"""rq on Redis DB 11: 2 x ``rq worker -w rq.SimpleWorker`` (no fork per job).

The default ``rq.Worker`` forks a work-horse per job (about 70-100 jobs/s here), so the row
uses SimpleWorker. Override with PEERS_RQ_PROCS / PEERS_RQ_WORKER_CLASS.
"""

from __future__ import annotations

import os
import sys
from collections.abc import Iterator
from contextlib import contextmanager

from benchmarks.peers.adapters import contract

URL = contract.redis_url(11)
PROCS = int(os.environ.get("PEERS_RQ_PROCS", "2"))
WORKER_CLASS = os.environ.get("PEERS_RQ_WORKER_CLASS", "rq.SimpleWorker")


def noop(idx: int, t_enq: float, phase: int) -> None:
    contract.record_start(idx, t_enq, phase)


class RqAdapter:
    name = "rq"

    def describe(self) -> dict[str, str]:
        return {
            "system": "rq",
            "version": contract.version_of("rq"),
            "workers": f"{PROCS} x `rq worker -w {WORKER_CLASS} --quiet --disable-job-desc-logging bench`, "
                       "sync handler, default result_ttl",
            "producer": "`Queue.enqueue()` (sync; 8 threads for the concurrent producer)",
            "durability": "Redis DB 11 (the server's own persistence settings)",
        }

    def reset(self) -> None:
        contract.flush_redis_db(URL)

    @contextmanager
    def producer(self) -> Iterator[contract.EnqueueSync]:
        from redis import Redis
        from rq import Queue

        queue = Queue("bench", connection=Redis.from_url(URL))

        def enqueue_one(idx: int, t_enq: float, phase: int) -> None:
            queue.enqueue(f"{__spec__.name}.noop", idx, t_enq, phase)

        yield enqueue_one

    def worker_commands(self) -> list[list[str]]:
        cmd = [contract.bin_path("rq"), "worker", "-u", URL, "-w", WORKER_CLASS, "--quiet",
               "--disable-job-desc-logging", "bench"]
        return [cmd] * PROCS


if __name__ == "__main__":
    sys.exit(contract.main(RqAdapter()))
