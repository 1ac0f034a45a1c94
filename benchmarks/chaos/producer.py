"""A producer that keeps enqueueing through a fault, in a thread of its own: gochatd's
``Client`` (INSERT, then XADD) on one long-lived pool, one job at a time at a steady rate.
Only what ``enqueue`` returned counts as acknowledged; a refused enqueue is counted by its
error class (``StoreUnavailable``, ...) and tried again after a pause, as a caller would."""

from __future__ import annotations

import random
import threading
import time
from collections import Counter
from dataclasses import dataclass, field

import trio

from gochatd.client.client import Client
from gochatd.errors import GochatdError


@dataclass
class Produced:
    acked: list[tuple[int, float, float]] = field(default_factory=list)  # id, wall clock, work_s
    refused: Counter[str] = field(default_factory=Counter)
    refused_at: list[float] = field(default_factory=list)


class Producer:
    def __init__(self, db_url: str, redis_url: str, *, rate_per_s: float,
                 work_s: tuple[float, float], seed: str, queue: str = "default") -> None:
        self.db_url = db_url
        self.redis_url = redis_url
        self.rate_per_s = rate_per_s
        self.work_s = work_s
        self.queue = queue
        self.rng = random.Random(seed)
        self.out = Produced()
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._main, name="chaos-producer", daemon=True)
        self.failure: BaseException | None = None

    def start(self) -> None:
        self._thread.start()

    def stop(self, timeout_s: float = 60.0) -> Produced:
        self._stop.set()
        self._thread.join(timeout_s)
        if self._thread.is_alive():
            raise RuntimeError("the producer did not stop")
        if self.failure is not None:
            raise RuntimeError(f"the producer failed: {self.failure!r}")
        return self.out

    def acked_after(self, t: float) -> int:
        return sum(1 for _, at, _ in list(self.out.acked) if at > t)

    def _main(self) -> None:
        try:
            trio.run(self._produce)
        except BaseException as exc:  # reported by stop()
            self.failure = exc

    async def _produce(self) -> None:
        pause = 1.0 / self.rate_per_s
        async with Client(self.db_url, self.redis_url) as client:
            while not self._stop.is_set():
                work = round(self.rng.uniform(*self.work_s), 3)
                try:
                    job = await client.enqueue("chaos:work", {"work_s": work, "effect": True},
                                               queue=self.queue)
                except GochatdError as exc:
                    self.out.refused[type(exc).__name__] += 1
                    self.out.refused_at.append(time.time())
                    await trio.sleep(0.1)
                    continue
                self.out.acked.append((job.id, time.time(), work))
                await trio.sleep(pause)
