"""The producer of ``gochatd bench --scenario budget``: a child process, so that its CPU and
its PostgreSQL backends are counted apart from the bench's own. gochatd's runs on this
venv's python; pgqueuer's on the peers' venv (benchmarks/peers/.venv)::

    python -m benchmarks.bench.budget_producer gochatd|pgqueuer DATABASE_URL [REDIS_URL]

It connects, prints ``ready``, then answers each command read from stdin with one JSON line:

    e2e N            N jobs from 8 concurrent tasks, each awaiting one enqueue at a time:
                     {"t_first", "t_end", "handoffs"}
    lat K SPACING    K jobs one at a time, SPACING ms apart: {"rows", "handoffs"}, a row per
                     job [job id, t0, t_commit, t_xadd, t_return] on ``time.time()``: before
                     the call, after the INSERT's commit (gochatd with Redis: when its XADD
                     starts, on the store's thread; otherwise when the call returns), after
                     the XADD (null without one), when the call returned
    bulk N           N jobs by ``enqueue_many`` of 500 (gochatd only): {"t_first", "t_end"}
    quit

``handoffs``: the client's units handed to its connection threads so far, per pool
(gochatd.io.handoff.HANDED; empty for pgqueuer).

Every line is the same no-op job (``bench:budget`` / pgqueuer's ``budget`` entrypoint)."""

from __future__ import annotations

import asyncio
import json
import sys
import time
from collections.abc import Awaitable, Callable
from typing import Any

PRODUCERS = 8
BULK = 500
Enqueue = Callable[[], Awaitable[int]]


def _say(value: Any) -> None:
    print(json.dumps(value), flush=True)


async def _e2e_asyncio(enqueue: Enqueue, n: int) -> dict[str, float]:
    t0 = time.time()

    async def one_task(k: int) -> None:
        for _ in range(k, n, PRODUCERS):
            await enqueue()

    await asyncio.gather(*(one_task(k) for k in range(PRODUCERS)))
    return {"t_first": t0, "t_end": time.time()}


async def _pgqueuer(url: str) -> None:
    import asyncpg
    from pgqueuer import Queries
    from pgqueuer.db import AsyncpgPoolDriver

    loop = asyncio.get_running_loop()
    async with asyncpg.create_pool(url, min_size=PRODUCERS, max_size=PRODUCERS) as pool:
        queries = Queries(AsyncpgPoolDriver(pool))

        async def enqueue() -> int:
            ids = await queries.enqueue("budget", b"")
            return int(ids[0])

        _say("ready")
        while (line := (await loop.run_in_executor(None, sys.stdin.readline)).split()) \
                and line[0] != "quit":
            if line[0] == "e2e":
                _say({**await _e2e_asyncio(enqueue, int(line[1])), "handoffs": {}})
                continue
            rows = []
            for _ in range(int(line[1])):
                t0 = time.time()
                job_id = await enqueue()
                t_return = time.time()
                rows.append([job_id, t0, t_return, None, t_return])
                await asyncio.sleep(float(line[2]) / 1000)
            _say({"rows": rows, "handoffs": {}})


async def _gochatd(url: str, redis_url: str) -> None:
    import trio

    import gochatd
    from benchmarks.bench.budget_handlers import JOB_TYPE
    from gochatd.io.handoff import HANDED

    marks: dict[str, float] = {}
    async with gochatd.Client(url, redis_url or None) as client:
        streams = client.streams
        if streams is not None:
            publish = streams.publish_here

            def timed_publish(refs: Any) -> None:
                marks["commit"] = time.time()
                publish(refs)
                marks["xadd"] = time.time()

            streams.publish_here = timed_publish  # type: ignore[method-assign]

        async def enqueue() -> int:
            return (await client.enqueue(JOB_TYPE, {})).id

        _say("ready")
        while (line := (await trio.to_thread.run_sync(sys.stdin.readline)).split()) \
                and line[0] != "quit":
            if line[0] == "e2e":
                _say({**await _e2e_trio(enqueue, int(line[1])), "handoffs": dict(HANDED)})
                continue
            if line[0] == "bulk":
                t_first, left = time.time(), int(line[1])
                while left > 0:
                    await client.enqueue_many([gochatd.NewJob(JOB_TYPE, {})
                                               for _ in range(min(BULK, left))])
                    left -= BULK
                _say({"t_first": t_first, "t_end": time.time()})
                continue
            rows = []
            for _ in range(int(line[1])):
                marks.clear()
                t0 = time.time()
                job_id = await enqueue()
                t_return = time.time()
                rows.append([job_id, t0, marks.get("commit", t_return), marks.get("xadd"),
                             t_return])
                await trio.sleep(float(line[2]) / 1000)
            _say({"rows": rows, "handoffs": dict(HANDED)})


async def _e2e_trio(enqueue: Enqueue, n: int) -> dict[str, float]:
    import trio

    t0 = time.time()

    async def one_task(k: int) -> None:
        for _ in range(k, n, PRODUCERS):
            await enqueue()

    async with trio.open_nursery() as nursery:
        for k in range(PRODUCERS):
            nursery.start_soon(one_task, k)
    return {"t_first": t0, "t_end": time.time()}


def main(argv: list[str]) -> int:
    system, url = argv[0], argv[1]
    if system == "pgqueuer":
        asyncio.run(_pgqueuer(url))
    else:
        import trio

        trio.run(_gochatd, url, argv[2] if len(argv) > 2 else "")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
