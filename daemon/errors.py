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
     └── DispatchUnavailable        Redis could not be reached (transient; workers poll)

``NonRetryable`` is raised by handlers, not by gochatd: it makes a job dead at once.
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
    def __init__(self, tenant_id: str, idempotency_key: str, existing_id: int) -> None:
        super().__init__(
            f"idempotency key {idempotency_key!r} of tenant {tenant_id!r} is already used by "
            f"job {existing_id} with a different job"
        )
        self.existing_id = existing_id


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


class DispatchUnavailable(GochatdError):
    pass


class NonRetryable(Exception):
    """Raise from a handler to make the job dead without further attempts."""
