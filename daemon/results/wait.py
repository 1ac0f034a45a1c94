"""Waiting for a job to finish: ``Client.wait`` (Trio or asyncio), ``SyncClient.wait``
(threads) and the gateway's long-poll.

One loop in both worlds: register a wake-up for the job (PostgreSQL: ``FinishWatch``), read
the row, return it once final, else sleep until the wake-up or the next re-read, whichever
is first. The row decides, never the notification:

- PostgreSQL: woken by ``NOTIFY gochatd_job_finished`` (watch.py); the re-read every
  ``FALLBACK_REREAD_S`` only bounds what a lost notification can cost.
- SQLite (no notifications) or no watch: a re-read with backoff, from ``POLL_FIRST_S`` up to
  ``POLL_MAX_S``: a waiter costs at most a few cheap reads a second.
"""

from __future__ import annotations

import contextlib
import threading
import time
from collections.abc import Awaitable, Callable, Iterator

import anyio
import sniffio
import trio

from gochatd.errors import JobFailed, JobNotFound, StoreUnavailable, WaitTimeout
from gochatd.model import Job, JobStatus
from gochatd.results.watch import FinishWatch, Wake

FALLBACK_REREAD_S = 5.0
POLL_FIRST_S = 0.02
POLL_MAX_S = 1.0
POLL_GROWTH = 1.5


def finished(job: Job | None, job_id: int) -> Job | None:
    """The job once it completed; None while it is not final. Raises ``JobNotFound`` (no
    such job, or pruned) and ``JobFailed`` (dead or cancelled)."""
    if job is None:
        raise JobNotFound(job_id)
    if job.status is JobStatus.COMPLETED:
        return job
    if job.status in (JobStatus.DEAD, JobStatus.CANCELLED):
        raise JobFailed(job)
    return None


class _Pace:
    """How long to sleep before the next re-read when no wake-up comes."""

    def __init__(self, notified: bool) -> None:
        self._notified = notified
        self._next_s = POLL_FIRST_S

    def next_s(self) -> float:
        if self._notified:
            return FALLBACK_REREAD_S
        step, self._next_s = self._next_s, min(self._next_s * POLL_GROWTH, POLL_MAX_S)
        return step


def _timeout(timeout_s: float | None) -> float:
    if timeout_s is None:
        return float("inf")
    if not timeout_s >= 0:  # NaN too
        raise ValueError("timeout_s must be a number >= 0, or None to wait without a limit")
    return float(timeout_s)


@contextlib.contextmanager
def _registered(watch: FinishWatch | None, job_id: int, wake: Wake) -> Iterator[None]:
    handle = watch.register(job_id, wake) if watch is not None else None
    try:
        yield
    finally:
        if watch is not None and handle is not None:
            watch.unregister(handle)


async def wait_async(get_job: Callable[[int], Awaitable[Job | None]], job_id: int,
                     timeout_s: float | None, watch: FinishWatch | None) -> Job:
    """The finished job (see ``finished``); ``WaitTimeout`` past ``timeout_s``."""
    limit_s = _timeout(timeout_s)
    deadline = anyio.current_time() + limit_s
    if watch is None:
        return await _wait_async(get_job, job_id, limit_s, deadline, None)
    await anyio.to_thread.run_sync(watch.announce, job_id)
    try:
        return await _wait_async(get_job, job_id, limit_s, deadline, watch)
    finally:
        with anyio.CancelScope(shield=True), anyio.move_on_after(5):
            await anyio.to_thread.run_sync(watch.withdraw, job_id)


async def _wait_async(get_job: Callable[[int], Awaitable[Job | None]], job_id: int,
                      limit_s: float, deadline: float, watch: FinishWatch | None) -> Job:
    pace = _Pace(watch is not None)
    while True:
        event = anyio.Event()
        with _registered(watch, job_id, _thread_safe_set(event)):
            job = await get_job(job_id)
            done = finished(job, job_id)
            if done is not None:
                return done
            assert job is not None
            remaining = deadline - anyio.current_time()
            if remaining <= 0:
                raise WaitTimeout(job, limit_s)
            with anyio.move_on_after(min(remaining, pace.next_s())):
                await event.wait()


def wait_sync(get_job: Callable[[int], Job | None], job_id: int, timeout_s: float | None,
              watch: FinishWatch | None) -> Job:
    """``wait_async`` for threads (``SyncClient``)."""
    limit_s = _timeout(timeout_s)
    deadline = time.monotonic() + limit_s
    if watch is None:
        return _wait_sync(get_job, job_id, limit_s, deadline, None)
    watch.announce(job_id)
    try:
        return _wait_sync(get_job, job_id, limit_s, deadline, watch)
    finally:
        watch.withdraw(job_id)


def _wait_sync(get_job: Callable[[int], Job | None], job_id: int, limit_s: float,
               deadline: float, watch: FinishWatch | None) -> Job:
    pace = _Pace(watch is not None)
    while True:
        event = threading.Event()
        with _registered(watch, job_id, event.set):
            job = get_job(job_id)
            done = finished(job, job_id)
            if done is not None:
                return done
            assert job is not None
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                raise WaitTimeout(job, limit_s)
            event.wait(min(remaining, pace.next_s()))


def _thread_safe_set(event: anyio.Event) -> Wake:
    """A callable any thread may call to set ``event`` in the current event loop."""
    if sniffio.current_async_library() == "trio":
        token = trio.lowlevel.current_trio_token()

        def wake_trio() -> None:
            with contextlib.suppress(trio.RunFinishedError):
                token.run_sync_soon(_set_once, event)

        return wake_trio
    import asyncio

    loop = asyncio.get_running_loop()

    def wake_asyncio() -> None:
        with contextlib.suppress(RuntimeError):  # the loop closed
            loop.call_soon_threadsafe(_set_once, event)

    return wake_asyncio


def _set_once(event: anyio.Event) -> None:
    event.set()


def listen_dsn(database_url: str | None) -> str | None:
    """The URL a waiter LISTENs on: a PostgreSQL ``database_url``; None (poll) otherwise."""
    if database_url and database_url.startswith(("postgresql://", "postgres://")):
        return database_url
    return None


class AsyncWaiter:
    """A client's waiting (``Client.wait``): its ``FinishWatch``, opened at the first wait
    (PostgreSQL only) and closed with the client."""

    def __init__(self, dsn: str | None) -> None:
        self._dsn = dsn
        self._watch: FinishWatch | None = None
        self._lock: anyio.Lock | None = None

    async def wait(self, get_job: Callable[[int], Awaitable[Job | None]], job_id: int,
                   timeout_s: float | None) -> Job:
        return await wait_async(get_job, job_id, timeout_s, await self._opened())

    async def _opened(self) -> FinishWatch | None:
        if self._dsn is None or self._watch is not None:
            return self._watch
        if self._lock is None:
            self._lock = anyio.Lock()
        async with self._lock:
            if self._watch is None:
                watch = FinishWatch(self._dsn)
                # A server that cannot be reached now: the read below says so.
                with contextlib.suppress(StoreUnavailable):
                    await anyio.to_thread.run_sync(watch.open)
                    self._watch = watch
        return self._watch

    def close(self) -> None:
        watch, self._watch, self._dsn = self._watch, None, None
        if watch is not None:
            watch.close()


class SyncWaiter:
    """``AsyncWaiter`` for ``SyncClient``: threads share one watch."""

    def __init__(self, dsn: str | None) -> None:
        self._dsn = dsn
        self._watch: FinishWatch | None = None
        self._lock = threading.Lock()

    def wait(self, get_job: Callable[[int], Job | None], job_id: int,
             timeout_s: float | None) -> Job:
        return wait_sync(get_job, job_id, timeout_s, self._opened())

    def _opened(self) -> FinishWatch | None:
        with self._lock:
            if self._dsn is not None and self._watch is None:
                watch = FinishWatch(self._dsn)
                with contextlib.suppress(StoreUnavailable):
                    watch.open()
                    self._watch = watch
            return self._watch

    def close(self) -> None:
        with self._lock:
            watch, self._watch, self._dsn = self._watch, None, None
        if watch is not None:
            watch.close()
