"""gochatd: a durable background-job worker daemon.

Public API::

    import gochatd

    @gochatd.job("message:send_reply", queue="high", timeout_s=60, max_attempts=25)
    async def send_reply(ctx: gochatd.JobContext) -> None: ...

    @gochatd.periodic("*/5 * * * *", job_type="sla:trigger_accounts", queue="scheduled_jobs")
    async def trigger_accounts(ctx: gochatd.JobContext) -> None: ...

    @gochatd.before_job          # also after_job(ctx, error) and middleware(ctx, call_next)
    async def trace(ctx: gochatd.JobContext) -> None: ...

    async with gochatd.Client("postgresql://…", "redis://…") as client:   # Trio or asyncio
        job = await client.enqueue("message:send_reply", {"message_id": 7})

    with gochatd.SyncClient("postgresql://…", "redis://…") as client:     # threads
        job = client.enqueue("message:send_reply", {"message_id": 7})
"""


from gochatd import testing
from gochatd.client import Client
from gochatd.context import JobContext
from gochatd.errors import (
    HookFailed,
    IdempotencyConflict,
    InvalidJob,
    InvalidReply,
    NonRetryable,
    RetryAfter,
)
from gochatd.hooks import after_job, before_job, middleware
from gochatd.model import EnqueueResult, Job, JobFilter, JobSelection, JobStatus, Reply
from gochatd.new_job import NewJob
from gochatd.periodic_jobs.specs import periodic
from gochatd.registry import job
from gochatd.sync_client import SyncClient

__version__ = "0.1.0"
__all__ = [
    "Client", "EnqueueResult", "HookFailed", "IdempotencyConflict", "InvalidJob",
    "InvalidReply", "Job", "JobContext", "JobFilter", "JobSelection", "JobStatus", "NewJob",
    "NonRetryable", "Reply", "RetryAfter", "SyncClient", "after_job", "before_job", "job",
    "middleware", "periodic", "testing",
]
