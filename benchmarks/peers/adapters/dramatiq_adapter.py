"""dramatiq on Redis DB 12: ``dramatiq --processes 2 --threads 8`` (its defaults on 2 cores).

RedisBroker with the default middleware; the actor has ``max_retries=0``. An idle worker polls
with backoff up to ``worker_timeout`` (1 s), which shows in its latency tail. Override with
PEERS_DRAMATIQ_PROCS / PEERS_DRAMATIQ_THREADS.
"""

from __future__ import annotations

import os
import sys
from collections.abc import Iterator
from contextlib import contextmanager

import dramatiq
from dramatiq.brokers.redis import RedisBroker

from benchmarks.peers.adapters import contract

URL = contract.redis_url(12)
PROCS = int(os.environ.get("PEERS_DRAMATIQ_PROCS", "2"))
THREADS = int(os.environ.get("PEERS_DRAMATIQ_THREADS", "8"))

dramatiq.set_broker(RedisBroker(url=URL))


@dramatiq.actor(queue_name="bench", max_retries=0)
def noop(idx: int, t_enq: float, phase: int) -> None:
    contract.record_start(idx, t_enq, phase)


class DramatiqAdapter:
    name = "dramatiq"

    def describe(self) -> dict[str, str]:
        return {
            "system": "dramatiq",
            "version": contract.version_of("dramatiq"),
            "workers": f"`dramatiq {__spec__.name} --processes {PROCS} --threads {THREADS}`, RedisBroker, "
                       "default middleware, sync actor",
            "producer": "`actor.send()` (sync; 8 threads for the concurrent producer)",
            "durability": "Redis DB 12 (the server's own persistence settings)",
        }

    def reset(self) -> None:
        contract.flush_redis_db(URL)

    @contextmanager
    def producer(self) -> Iterator[contract.EnqueueSync]:
        def enqueue_one(idx: int, t_enq: float, phase: int) -> None:
            noop.send(idx, t_enq, phase)

        yield enqueue_one

    def worker_commands(self) -> list[list[str]]:
        return [[contract.bin_path("dramatiq"), __spec__.name, "--processes", str(PROCS),
                 "--threads", str(THREADS)]]


if __name__ == "__main__":
    sys.exit(contract.main(DramatiqAdapter()))
