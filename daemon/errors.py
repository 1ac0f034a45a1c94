"""The gochatd error tree.

    GochatdError
     ├── UserError                  bad input from a person or a producer: exit 2, HTTP 4xx
     │    ├── ConfigError           a config key is missing, malformed or out of range
     │    ├── InvalidJob            payload not JSON / too big, bad queue or type name
     │    ├── IdempotencyConflict   same (tenant, idempotency_key), different job
     │    ├── JobNotFound
     │    └── InvalidTransition     the job's status does not allow that operation
     ├── StaleLease                 the lease owner/fence is no longer current; nothing written
     ├── StoreUnavailable           the database could not be reached (transient)
     ├── ResourceClosed             gochatd's own connections were used after close()
     └── DispatchUnavailable        Redis could not be reached (transient; workers poll)

``NonRetryable`` is raised by handlers, not by gochatd: it makes a job dead at once.
``HandlerFailure`` (and its ``RetryAfter``) is raised by handlers too, the HTTP handlers
among them: it names the job's ``error_class`` and may ask for a retry delay.
``InvalidReply`` (a ``NonRetryable`` and a ``ValueError``) is what ``ctx.reply`` raises for
a reply it cannot accept: the same handler would only fail the same way again.
"""

from __future__ import annotations


class GochatdError(Exception):
    """Base of every error gochatd raises on purpose."""


class UserError(GochatdError):
    """Input that a person or producer can fix. Rendered as one line, never a traceback."""


class ConfigError(UserError):
    pass


class InvalidJob(UserError):
    pass


class IdempotencyConflict(UserError):
    def __init__(
        self, tenant_id: str, idempotency_key: str, existing_id: int, index: int | None = None
    ) -> None:
        where = f"requests[{index}]: " if index is not None else ""
        super().__init__(
            f"{where}idempotency key {idempotency_key!r} of tenant {tenant_id!r} is already "
            f"used by job {existing_id} with a different job"
        )
        self.existing_id = existing_id
        #: The position of the item in an ``enqueue_many`` batch.
        self.index = index


class JobNotFound(UserError):
    def __init__(self, job_id: int) -> None:
        super().__init__(f"job {job_id} not found")
        self.job_id = job_id


class InvalidTransition(UserError):
    pass


class StaleLease(GochatdError):
    """A complete/retry/fail presented an owner or fence that is no longer current."""

    def __init__(self, job_id: int, fence: int) -> None:
        super().__init__(f"stale lease on job {job_id} (fence {fence}); nothing written")
        self.job_id = job_id
        self.fence = fence


class StoreUnavailable(GochatdError):
    pass


class ResourceClosed(GochatdError):
    """Connections that gochatd closed itself were used again: a bug in the caller (Closed),
    not an outage (Broken: ``StoreUnavailable``, ``DispatchUnavailable``)."""


class TenantMoved(StoreUnavailable):
    """The database refused a write because the tenant's rows moved (or are moving) to
    another database (``gochatd migrate``). The routed store reloads its routes and retries;
    elsewhere it is a retryable unavailability."""

    def __init__(self) -> None:
        super().__init__("the tenant is being moved to another database; retry shortly")


class DispatchUnavailable(GochatdError):
    pass


class NonRetryable(Exception):
    """Raise from a handler to make the job dead without further attempts."""


class InvalidReply(NonRetryable, ValueError):
    """``ctx.reply`` was given something it cannot store (see gochatd.outbox.reply)."""


class HandlerFailure(Exception):
    """A handler failure that names its own ``error_class`` (for example ``http_503``),
    whether a retry can help, and optionally how long to wait before it."""

    def __init__(
        self, error_class: str, message: str, *, retryable: bool = True,
        retry_after_s: float | None = None,
    ) -> None:
        super().__init__(message)
        self.error_class = error_class
        self.retryable = retryable
        self.retry_after_s = retry_after_s


class RetryAfter(HandlerFailure):
    """Raise from a handler to retry after ``delay_s`` seconds (capped by
    ``worker.retry_cap_s``) instead of the exponential backoff; it still counts as an attempt."""

    def __init__(self, delay_s: float, message: str = "asked to retry later") -> None:
        super().__init__("retry_after", message, retry_after_s=delay_s)
