"""What a handler sees of its job."""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

import structlog

from gochatd.errors import InvalidReply
from gochatd.io.handoff import abandoned_on_cancel
from gochatd.model import Reply
from gochatd.outbox.reply import MAX_REPLIES_PER_JOB, make_reply

if TYPE_CHECKING:
    from gochatd.workflows.model import Dependency, JobLinks

#: How a handler's context reads its job's dependencies (the worker's store).
LinksReader = Callable[[int], Awaitable["JobLinks | None"]]


@dataclass(frozen=True, slots=True)
class JobContext:
    job_id: int
    job_type: str
    queue: str
    tenant_id: str
    payload: dict[str, Any]
    attempt: int
    max_attempts: int
    fence: int
    log: structlog.typing.FilteringBoundLogger
    traceparent: str | None = None
    #: Buffered by ``reply``; the runner writes them only with a completion.
    replies: list[Reply] = field(default_factory=list)
    links: LinksReader | None = None

    async def dependencies(self) -> list[Dependency]:
        """The jobs this one waited for (``depends_on``, the link before it in a chain, a
        batch's jobs for its callback), in id order, each with its status and result; empty
        for a job without dependencies (docs/workflows.md). One read of the store per call."""
        if self.links is None:
            return []
        # A read the handler may give up at once: a lease guard's stop must not wait on it.
        with abandoned_on_cancel():
            links = await self.links(self.job_id)
        return [] if links is None else links.dependencies

    async def reply(self, *, channel: str, to: str, body: dict[str, Any], dedupe_key: str) -> None:
        """Queue a reply for delivery through ``channel``'s provider. Nothing is written now:
        the reply reaches the outbox in the same transaction that completes this job, and
        only if that completion applies (a failed, retried or stale run writes none).
        ``dedupe_key`` is unique per tenant: a second reply with the same key is dropped."""
        reply = make_reply(channel=channel, to=to, body=body, dedupe_key=dedupe_key)
        if len(self.replies) >= MAX_REPLIES_PER_JOB:
            raise InvalidReply(f"a job may buffer at most {MAX_REPLIES_PER_JOB} replies")
        self.replies.append(reply)

    @property
    def trace_id(self) -> str | None:
        """The W3C trace id from ``traceparent`` (``00-<trace_id>-<span_id>-<flags>``)."""
        if not self.traceparent:
            return None
        parts = self.traceparent.split("-")
        return parts[1] if len(parts) >= 4 else None
