"""The daemon's first connection to PostgreSQL. The server may come up after gochatd (a
host booting, a failover), so ``serve`` keeps trying, one log line per attempt with a
capped backoff, until it connects or is stopped. Commands and the client fail at once
instead (one line naming the server's reason)."""

from __future__ import annotations

import structlog
import trio

from gochatd.errors import StoreUnavailable
from gochatd.store.base import JobStore

FIRST_RETRY_S = 0.5
MAX_RETRY_S = 10.0


async def open_until_connected(
    store: JobStore, log: structlog.typing.FilteringBoundLogger
) -> None:
    """``store.open()``, again after 0.5 s, 1 s, 2 s … (at most ``MAX_RETRY_S`` apart)."""
    delay_s, attempt = FIRST_RETRY_S, 1
    while True:
        try:
            await store.open()
            if attempt > 1:
                log.info("store_connected", attempts=attempt)
            return
        except StoreUnavailable as exc:
            log.warning("store_connect_failed", attempt=attempt, error=str(exc),
                        retry_in_s=delay_s)
        await trio.sleep(delay_s)
        delay_s, attempt = min(delay_s * 2, MAX_RETRY_S), attempt + 1
