"""celery with a Redis broker on DB 13, no result backend: prefork, concurrency 2.

``-P prefork -c 2 --prefetch-multiplier 4`` (concurrency = cores, default prefetch), gossip,
mingle and heartbeat off, ``task_ignore_result=True``, ``acks_late=False`` (celery's default).
Override with PEERS_CELERY_POOL / PEERS_CELERY_CONCURRENCY / PEERS_CELERY_PREFETCH.
"""

from __future__ import annotations

import os
import sys
from collections.abc import Iterator
from contextlib import contextmanager

from celery import Celery

from benchmarks.peers.adapters import contract

URL = contract.redis_url(13)
POOL = os.environ.get("PEERS_CELERY_POOL", "prefork")
CONCURRENCY = int(os.environ.get("PEERS_CELERY_CONCURRENCY", "2"))
PREFETCH = int(os.environ.get("PEERS_CELERY_PREFETCH", "4"))

app = Celery("peers_bench", broker=URL)
app.conf.update(task_ignore_result=True, task_default_queue="bench", worker_prefetch_multiplier=PREFETCH,
                broker_connection_retry_on_startup=True, worker_hijack_root_logger=False)


@app.task(name="noop")
def noop(idx: int, t_enq: float, phase: int) -> None:
    contract.record_start(idx, t_enq, phase)


class CeleryAdapter:
    name = "celery"

    def _argv(self) -> list[str]:
        return ["-A", __spec__.name, "worker", "-P", POOL, "-c", str(CONCURRENCY), "--prefetch-multiplier",
                str(PREFETCH), "--without-gossip", "--without-mingle", "--without-heartbeat",
                "-l", "WARNING", "-Q", "bench"]

    def describe(self) -> dict[str, str]:
        return {
            "system": "celery",
            "version": f"{contract.version_of('celery')} (kombu {contract.version_of('kombu')})",
            "workers": "`celery " + " ".join(self._argv()) + "`, task_ignore_result=True, "
                       "acks_late=False (default), sync task",
            "producer": "`task.delay()` (sync; 8 threads for the concurrent producer)",
            "durability": "Redis DB 13 as broker (the server's own persistence settings), no result "
                          "backend; acks on receipt",
        }

    def reset(self) -> None:
        contract.flush_redis_db(URL)

    @contextmanager
    def producer(self) -> Iterator[contract.EnqueueSync]:
        def enqueue_one(idx: int, t_enq: float, phase: int) -> None:
            noop.delay(idx, t_enq, phase)

        yield enqueue_one

    def worker_commands(self) -> list[list[str]]:
        return [[contract.bin_path("celery"), *self._argv()]]


if __name__ == "__main__":
    sys.exit(contract.main(CeleryAdapter()))
