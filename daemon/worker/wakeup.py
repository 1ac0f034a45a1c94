"""A level-triggered wake-up flag that many loops can set and one loop waits on."""

from __future__ import annotations

import math

import trio


class Wakeup:
    def __init__(self) -> None:
        self._event = trio.Event()

    def set(self) -> None:
        self._event.set()

    async def wait(self, timeout_s: float = math.inf) -> bool:
        """Wait until set or the timeout; clears the flag. True when it was set."""
        with trio.move_on_after(max(0.0, timeout_s)):
            await self._event.wait()
        fired = self._event.is_set()
        if fired:
            self._event = trio.Event()
        return fired


class Wakeups:
    """The daemon's wake-up flags, one per waiting loop."""

    def __init__(self) -> None:
        #: The intake (streams reader or poller): new work, a resume, a route change.
        self.intake = Wakeup()
        #: The scheduler (streams mode): a job became due without a stream entry.
        self.schedule = Wakeup()
        #: A handler slot was freed, or a job left this worker.
        self.slot_freed = Wakeup()
        #: The outbox sender: a completion wrote replies, a delivery ended, a requeue.
        self.outbox = Wakeup()

    def new_work(self) -> None:
        """Work may have become claimable: wake the intake and the scheduler."""
        self.intake.set()
        self.schedule.set()
