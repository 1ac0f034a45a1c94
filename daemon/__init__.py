"""gochatd: a durable background-job worker daemon.

Public API::

    import gochatd

    @gochatd.job("message:send_reply", queue="high", timeout_s=60, max_attempts=25)
    async def send_reply(ctx: gochatd.JobContext) -> None: ...
"""

import gochatd.aio  # noqa: F401, I001  # trio_asyncio must be imported before psycopg

from gochatd.context import JobContext
from gochatd.errors import IdempotencyConflict, NonRetryable, StaleLease
from gochatd.registry import job

__version__ = "0.1.0"
__all__ = ["IdempotencyConflict", "JobContext", "NonRetryable", "StaleLease", "job"]
