"""The store's ``after_commit`` for a client's write: the XADD of its new, due rows."""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence

from gochatd.dispatch.redis_streams import RedisStreams
from gochatd.model import DispatchRef, EnqueueRequest, EnqueueResult
from gochatd.obs.redact import redact_error


class Publisher:
    """The store's ``after_commit`` for one write: XADDs the new, due rows on the store's
    connection thread, right after the commit (one thread hop for both). A failed XADD never
    fails the enqueue: the row is the truth, and the sweep re-dispatches it."""

    def __init__(self, streams: RedisStreams) -> None:
        self.streams = streams
        self.failed: list[DispatchRef] = []
        #: What went wrong, redacted (an outage, or any other Redis error: none may fail an
        #: enqueue whose rows committed).
        self.error = ""

    def __call__(self, results: Sequence[EnqueueResult]) -> None:
        refs = [DispatchRef(r.job.id, r.job.job_type, r.job.queue, r.job.tenant_id)
                for r in results if r.created and r.job.dispatched_at is not None]
        try:
            self.streams.publish_here(refs)
        except Exception as exc:  # after the commit: logged by _after_commit, never raised
            self.failed = refs
            self.error = redact_error(f"{type(exc).__name__}: {exc}", limit=200)


def with_dispatch(request: EnqueueRequest) -> EnqueueRequest:
    return dataclasses.replace(request, dispatch_now=True)
