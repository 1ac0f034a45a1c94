"""The daemon's signals: SIGTERM or SIGINT asks the lifecycle to stop (one more while it
stops forces the stop), SIGHUP reloads the settings. Before the daemon runs (its first
connections, which wait for a PostgreSQL that is not up yet), SIGTERM abandons the start
(exit 0), SIGHUP is ignored (nothing to reload yet) and Ctrl-C is the CLI's (exit 130)."""

from __future__ import annotations

import signal
from collections.abc import Awaitable, Callable
from typing import Any

import structlog
import trio

from gochatd.lifecycle import Lifecycle
from gochatd.reload import Reloader


async def watch_signals(lifecycle: Lifecycle, reloader: Reloader) -> None:
    with trio.open_signal_receiver(signal.SIGTERM, signal.SIGINT, signal.SIGHUP) as signals:
        async for signum in signals:
            if signum == signal.SIGHUP:
                reloader.reload()
            else:
                lifecycle.request_stop(force=lifecycle.stopping)


async def start_unless_stopped(start: Callable[[], Awaitable[Any]],
                               log: structlog.typing.FilteringBoundLogger, *, watch: bool) -> bool:
    """Run ``start``; with ``watch``, a SIGTERM meanwhile cancels it. False if one came."""
    if not watch:
        await start()
        return True
    stopped = False
    async with trio.open_nursery() as nursery:
        with trio.open_signal_receiver(signal.SIGTERM, signal.SIGHUP) as signals:

            async def listen() -> None:
                nonlocal stopped
                async for signum in signals:
                    if signum == signal.SIGTERM:
                        stopped = True
                        log.info("stop_requested_while_starting",
                                 signal=signal.Signals(signum).name)
                        nursery.cancel_scope.cancel()
                        return

            nursery.start_soon(listen)
            await start()
            nursery.cancel_scope.cancel()
    return not stopped
