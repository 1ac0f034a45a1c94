"""Daemon B's handlers in a mixed fleet (tests/e2e/test_mixed_handlers.py)."""

from __future__ import annotations

import gochatd
from gochatd.context import JobContext
from tests.support.fleet_handlers import ONLY_B


@gochatd.job(ONLY_B)
async def only_b(ctx: JobContext) -> None:
    return None
