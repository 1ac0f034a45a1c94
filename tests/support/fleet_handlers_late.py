"""The handler of a type no daemon of the fleet had (tests/e2e/test_mixed_handlers.py)."""

from __future__ import annotations

import gochatd
from gochatd.context import JobContext
from tests.support.fleet_handlers import LATE


@gochatd.job(LATE)
async def late(ctx: JobContext) -> None:
    return None
