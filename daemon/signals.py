"""The daemon's signals: SIGTERM or SIGINT asks the lifecycle to stop (one more while it
stops forces the stop), SIGHUP reloads the settings."""

from __future__ import annotations

import signal

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
