"""A handler that makes the libraries speak, loaded by a real daemon with
``--handlers tests.support.library_log_handlers``: ``test:library_log`` logs what psycopg_pool
logs when it drops a dead connection (naming the connection string, as library messages do)
through the standard library's ``logging``, and raises a Python warning."""

import logging
import os
import warnings

import gochatd
from gochatd.context import JobContext


@gochatd.job("test:library_log")
async def library_log(ctx: JobContext) -> None:
    dsn = os.environ.get("GOCHAT_DATABASE_URL", "")
    logging.getLogger("psycopg.pool").warning(
        "discarding closed connection: <psycopg.Connection [BAD] (%s)>", dsn)
    logging.getLogger("redis.connection").info("a library's chatter that stays out")
    warnings.warn(f"a library's warning for job {ctx.job_id}", UserWarning, stacklevel=1)
