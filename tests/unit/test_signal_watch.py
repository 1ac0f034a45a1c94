"""The daemon's one signal watcher (signals.py), with real signals sent to this process: a
stop signal during the start cancels only the start, also while the start holds a nursery
(trio-asyncio's loop: what misnested before, issue 23); once running, SIGTERM asks the
lifecycle to stop and SIGHUP reloads."""

from __future__ import annotations

import os
import signal
from collections.abc import Awaitable, Callable
from typing import Any

import trio

from gochatd.obs.counters import Counters
from gochatd.obs.logs import get_logger
from gochatd.obs.sdnotify import Notifier
from gochatd.worker.lifecycle import Lifecycle
from gochatd.worker.pool import ActiveJobs
from gochatd.worker.runtimes import loop_for
from gochatd.worker.signals import watching_signals
from gochatd.worker.wakeup import Wakeups
from tests.support.wait import wait_until


class _Reloads:
    def __init__(self) -> None:
        self.calls = 0

    def reload(self, **_: Any) -> tuple[list[str], list[str]]:
        self.calls += 1
        return [], []


def _now(read: Callable[[], Any]) -> Callable[[], Awaitable[Any]]:
    async def probe() -> Any:
        return read()

    return probe


def _lifecycle() -> Lifecycle:
    return Lifecycle(ActiveJobs(), notifier=Notifier(""), wakeups=Wakeups(),
                     counters=Counters(), worker_id="t")


async def test_sigterm_during_the_start_leaves_the_nursery_it_opened() -> None:
    reloads, lifecycle = _Reloads(), _lifecycle()
    got_to_the_end = False
    async with watching_signals(lifecycle, reloads, get_logger(), enabled=True) as watch:  # type: ignore[arg-type]
        async with loop_for({"asyncio"}):  # a nursery, entered inside the start scope
            os.kill(os.getpid(), signal.SIGHUP)  # nothing to reload yet: ignored
            os.kill(os.getpid(), signal.SIGTERM)
            await trio.sleep_forever()
        got_to_the_end = True
    assert not got_to_the_end  # the start was cancelled, not run on
    assert watch.stopped_by is signal.SIGTERM and watch.exit_code_before_start == 0
    assert not watch.begin() and reloads.calls == 0 and not lifecycle.stopping


async def test_ctrl_c_during_the_start_exits_130() -> None:
    async with watching_signals(_lifecycle(), _Reloads(), get_logger(), enabled=True) as watch:  # type: ignore[arg-type]
        os.kill(os.getpid(), signal.SIGINT)
        await trio.sleep_forever()
    assert watch.stopped_by is signal.SIGINT and watch.exit_code_before_start == 130


async def test_once_running_sighup_reloads_and_sigterm_stops() -> None:
    reloads, lifecycle = _Reloads(), _lifecycle()
    async with watching_signals(lifecycle, reloads, get_logger(), enabled=True) as watch:  # type: ignore[arg-type]
        assert watch.begin()
        os.kill(os.getpid(), signal.SIGHUP)
        await wait_until(_now(lambda: reloads.calls), timeout_s=30, what="a reload")
        os.kill(os.getpid(), signal.SIGTERM)
        await wait_until(_now(lambda: lifecycle.stopping), timeout_s=30, what="a stop")
    assert watch.stopped_by is None and not lifecycle.stop_now
