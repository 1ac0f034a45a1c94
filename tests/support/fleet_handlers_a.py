"""Daemon A's handlers in a mixed fleet (tests/e2e/test_mixed_handlers.py)."""

from __future__ import annotations

import gochatd
from gochatd.context import JobContext
from tests.support.fleet_handlers import ONLY_A, TICK


@gochatd.job(ONLY_A)
async def only_a(ctx: JobContext) -> None:
    return None


@gochatd.job(TICK)
async def tick(ctx: JobContext) -> None:
    return None
