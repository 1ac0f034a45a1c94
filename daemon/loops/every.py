"""The bodies the maintenance loops that read the store share: a pass, then a pause. A store
that is down is counted and logged as a transient error and the next pass tries again;
anything else ends the daemon, as in every loop.

``run_every`` pauses a fixed time (stats, retention). ``run_on_change`` waits for the
store's announcement of a change (PostgreSQL NOTIFY, migration 0016) or a slow fallback
period, since the announcement is only a wake-up: a lost one is made up within
``fallback_s``. Without announcements (SQLite, a pooler without a listen URL) it reads on
the short period, as before."""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import NoReturn

import trio

from gochatd.errors import StoreUnavailable
from gochatd.obs.counters import Counters
from gochatd.store import JobStore


async def run_every(failed_event: str, run_once: Callable[[], Awaitable[object]],
                    interval_s: Callable[[], float], counters: Counters,
                    task_status: trio.TaskStatus[None]) -> NoReturn:
    """``interval_s`` is read after each pass, so a reload takes effect at the next one."""
    task_status.started()
    while True:
        try:
            await run_once()
        except StoreUnavailable as exc:
            counters.transient_error(failed_event, exc)
        await trio.sleep(interval_s())


async def wait_for_change(store: JobStore, what: str, *, short_s: float,
                          fallback_s: float) -> bool:
    """Until ``what`` changed (True) or the period passed (False): ``fallback_s`` while the
    store announces changes, ``short_s`` otherwise or while its listener is down (the
    notify loop counts and logs that failure: loops/notify.py)."""
    if not store.control_notifications:
        await trio.sleep(short_s)
        return False
    try:
        return await store.wait_for_control(what, fallback_s)
    except StoreUnavailable:  # once per failed LISTEN connection
        await trio.sleep(short_s)
        return False


async def run_on_change(failed_event: str, what: str, run_once: Callable[[], Awaitable[object]],
                        store: JobStore, *, short_s: float, fallback_s: float,
                        counters: Counters, task_status: trio.TaskStatus[None]) -> NoReturn:
    """A pass at start, then one after each announced change of ``what`` or each period;
    a pass that failed is tried again after ``short_s``."""
    task_status.started()
    while True:
        try:
            await run_once()
        except StoreUnavailable as exc:
            counters.transient_error(failed_event, exc)
            await trio.sleep(short_s)
            continue
        await wait_for_change(store, what, short_s=short_s, fallback_s=fallback_s)
