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
        done = await client.wait(job.id, timeout_s=30)    # done.result: what it returned

    with gochatd.SyncClient("postgresql://…", "redis://…") as client:     # threads
        job = client.enqueue("message:send_reply", {"message_id": 7})
"""


from typing import Any

from gochatd.client.client import Client
from gochatd.client.sync_client import SyncClient
from gochatd.context import JobContext
from gochatd.errors import (
    HookFailed,
    IdempotencyConflict,
    InvalidJob,
    InvalidReply,
    JobFailed,
    NonRetryable,
    RetryAfter,
    WaitTimeout,
)
from gochatd.hooks import after_job, before_job, middleware
from gochatd.model import EnqueueResult, Job, JobFilter, JobSelection, JobStatus, Reply
from gochatd.new_job import NewJob
from gochatd.worker.registry import job

__version__ = "0.1.0"
__all__ = [
    "Client", "EnqueueResult", "HookFailed", "IdempotencyConflict", "InvalidJob",
    "InvalidReply", "Job", "JobContext", "JobFailed", "JobFilter", "JobSelection", "JobStatus",
    "NewJob", "NonRetryable", "Reply", "RetryAfter", "SyncClient", "WaitTimeout", "after_job",
    "before_job", "job", "middleware", "periodic", "testing",
]


def __getattr__(name: str) -> Any:
    # Loaded when first used, so that ``import gochatd`` (a producer's) stays light:
    # ``gochatd.testing`` (the inline runner) and ``gochatd.periodic`` (the cron parser).
    if name == "testing":
        import gochatd.testing

        return gochatd.testing
    if name == "periodic":
        from gochatd.periodic_jobs.specs import periodic

        return periodic
    raise AttributeError(f"module 'gochatd' has no attribute {name!r}")
