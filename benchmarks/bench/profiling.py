"""``gochatd bench --profile FILE``: a pyinstrument profile of the in-process worker while it
drains a backlog of N no-op jobs (an extra drain after the measured ones, so the profiler's
overhead does not touch the figures). pyinstrument is a dev dependency
(``pip install -e '.[dev]'``)."""

from __future__ import annotations

from collections.abc import Awaitable, Callable

import trio

from benchmarks.bench.inprocess import wait_completed
from gochatd.worker.service import Worker


async def profile_drain(worker: Worker, fill: Callable[[], Awaitable[int]], path: str) -> None:
    """Pause ``worker``, let ``fill`` write a backlog (returns its size), then profile from
    resume until that backlog is completed."""
    try:
        from pyinstrument import Profiler
    except ImportError as exc:
        raise ValueError("--profile needs pyinstrument: pip install pyinstrument") from exc
    # async_mode "disabled": sample the whole thread (every task of the Trio run and the
    # asyncio side of the bridge), not one coroutine.
    profiler = Profiler(interval=0.0005, async_mode="disabled")
    worker.control.pause()
    target = worker.counters["finished_completed"] + await fill()
    profiler.start()
    worker.control.resume()
    try:
        await wait_completed(worker, target, timeout_s=600)
    finally:
        profiler.stop()
    # FILE.html: pyinstrument's interactive page; anything else: the call tree as text.
    if path.endswith(".html"):
        text = profiler.output_html()
    else:
        text = profiler.output_text(unicode=False, color=False, show_all=False)
    await trio.Path(path).write_text(text, encoding="utf-8")
