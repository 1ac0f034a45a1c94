"""What an idle daemon asks the store so that it can sleep instead of polling (issue 22):
when the earliest running lease expires (loops/reap.py), and whether pauses, routes and
fleet rows changed (``wait_for_control``). The SQL stores' defaults: no announcements
(SQLite is one embedded file: its followers read these tables on their short period);
PostgreSQL announces them (store/pg_listen.py, migration 0016)."""

from __future__ import annotations

import math

import trio

from gochatd.store.core import StoreCore


class SqlIdleOps(StoreCore):
    #: Whether pause, route and fleet changes are announced (``wait_for_control``).
    control_notifications = False

    async def next_lease_expiry_in_s(self, expired_within_s: float | None = None
                                     ) -> float | None:
        rows = await self._read("next_lease_expiry_in_s",
                                {"expired_within_s": expired_within_s})
        value = rows[0][0] if rows else None
        return None if value is None or math.isnan(value) else float(value)

    async def wait_for_control(self, what: str, timeout_s: float) -> bool:
        await trio.sleep(timeout_s)
        return False
