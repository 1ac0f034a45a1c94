"""The PostgreSQL store's wake-ups: LISTEN on one connection of its own (pg_threads.Listener)
for new work (``gochatd_jobs``, migration 0001's trigger) and for control changes (pauses,
routes, fleet rows: migration 0016's triggers). Only wake-ups: the tables are the truth."""

from __future__ import annotations

import trio

from gochatd.errors import StoreUnavailable
from gochatd.store.pg_threads import Listener

NOTIFY_CHANNEL = "gochatd_jobs"
#: Control channels (migration 0016), by the name ``wait_for_control`` takes.
CONTROL_CHANNELS = {"pauses": "gochatd_pauses", "routes": "gochatd_routes",
                    "fleet": "gochatd_fleet"}
CHANNELS = (NOTIFY_CHANNEL, *CONTROL_CHANNELS.values())


class PgNotifications:
    #: Both False behind a pooler without a listen URL (the store then polls).
    has_notifications = True
    control_notifications = True
    _listener: Listener | None = None

    async def _wait(self, enabled: bool, channel: str, timeout_s: float) -> bool:
        if not enabled:
            await trio.sleep(timeout_s)
            return False
        if self._listener is None:
            raise StoreUnavailable("postgres store is not open")
        try:
            return await self._listener.wait(timeout_s, channel)
        except ConnectionError as exc:
            raise StoreUnavailable(str(exc)) from None

    async def wait_for_notification(self, timeout_s: float) -> bool:
        """True when another process announced new work (the NOTIFY trigger) since the last
        call (listening started when the store opened)."""
        return await self._wait(self.has_notifications, NOTIFY_CHANNEL, timeout_s)

    async def wait_for_control(self, what: str, timeout_s: float) -> bool:
        """True when a change of ``what`` (pauses, routes, fleet) was announced, or the
        listener reconnected, since the last call for it; False after the timeout."""
        return await self._wait(self.control_notifications, CONTROL_CHANNELS[what], timeout_s)
