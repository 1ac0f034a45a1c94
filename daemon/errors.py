"""The gochatd error tree: every error gochatd raises on purpose, where it is defined.

    GochatdError
     ├── UserError                  the caller can fix it: exit 2, HTTP 4xx, one line
     │    ├── ConfigError           a setting (or database_url) is missing, malformed, out of range
     │    ├── InvalidJob            payload not JSON / too big, bad queue or type name, or a
     │    │                         row the database's own constraints refuse
     │    ├── IdempotencyConflict   same (tenant, idempotency_key), different job
     │    ├── JobNotFound
     │    ├── InvalidTransition     the job's status does not allow that operation
     │    ├── UsageError            bad command-line arguments               (cli/common.py)
     │    ├── InvalidHandler        @gochatd.job refused a handler: unknown runtime, or a
     │    │                         runtime that does not fit the function (also a ValueError)
     │    ├── NoDatabase            no gochatd database or schema at the URL  (store/presence.py)
     │    ├── OutboxNotFound        no such reply in the outbox               (outbox/cli.py)
     │    └── MigrateError          a migration phase refused (plan, state)   (migrate/backends.py)
     │         └── CutoverBlocked   validation found a difference: exit 3     (migrate/phases.py)
     ├── StoreUnavailable           Broken: the database could not be reached (transient)
     │    └── TenantMoved           the tenant's rows moved; the routed store re-routes and retries
     ├── DispatchUnavailable        Broken: Redis could not be reached (transient; workers poll)
     ├── JobFailed                  a waited-for job ended dead or cancelled; ``.job`` (results/wait.py)
     ├── WaitTimeout                a waited-for job not finished by ``timeout_s``; a TimeoutError too
     ├── ResourceClosed             Closed: gochatd's own connections used after close() (a bug
     │                              in the caller, not an outage)
     └── MigrationFailed            a database error inside a migration phase; re-run resumes
                                    (migrate/cli.py)

Closed vs Broken: ``ResourceClosed`` means the program used what it had closed, and retrying
cannot help; ``StoreUnavailable`` and ``DispatchUnavailable`` mean the world is down for
now, and the daemon retries (the command line says so in one line, exit 1).

Raised by handlers, not by gochatd (plain ``Exception`` subclasses, outside the tree):
``NonRetryable`` makes a job dead at once; ``HandlerFailure`` (and its ``RetryAfter``) names
the job's ``error_class`` and may ask for a retry delay (the HTTP handlers raise it too);
``InvalidReply`` (a ``NonRetryable`` and a ``ValueError``) is what ``ctx.reply`` raises for a
reply it cannot accept; ``HookFailed`` carries a hook's exception (hooks.py), classified as
that exception and stored naming the hook. Not errors of the API either: ``CronError`` (a ``ValueError`` for a
bad schedule, turned into a ``ConfigError`` at load), ``ApiError`` (admin/app.py: an HTTP
error answer) and ``SysFailError`` (what the built-in ``sys:fail`` handler raises).

A stale finish is not an exception: the fenced UPDATE matches no row, writes nothing, and
the finisher counts it (``finish_jobs`` returns the ids it applied).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from gochatd.model import Job


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


class InvalidHandler(UserError, ValueError):
    """``@gochatd.job`` refused a handler at registration (runtimes.check_runtime)."""


class StoreUnavailable(GochatdError):
    """Broken: the database could not be reached or answered with an outage (transient)."""


class ResourceClosed(GochatdError):
    """Connections that gochatd closed itself were used again: a bug in the caller (Closed),
    not an outage (Broken: ``StoreUnavailable``, ``DispatchUnavailable``)."""


class TenantMoved(StoreUnavailable):
    """The database refused a write because the tenant's rows moved (or are moving) to
    another database (``gochatd move``). The routed store reloads its routes and retries;
    elsewhere it is a retryable unavailability."""

    def __init__(self) -> None:
        super().__init__("the tenant is being moved to another database; retry shortly")


class DispatchUnavailable(GochatdError):
    """Broken: Redis could not be reached (transient; the daemon polls the database)."""


class JobFailed(GochatdError):
    """``Client.wait``: the job ended ``dead`` or ``cancelled``. The message names its status
    and error class; ``.job`` is the finished row."""

    def __init__(self, job: Job) -> None:
        reason = f"{job.error_class}: {job.last_error}" if job.last_error else job.error_class
        super().__init__(f"job {job.id} ended {job.status.value}" + (f" ({reason})" if reason else ""))
        self.job = job
        self.error_class = job.error_class


class WaitTimeout(GochatdError, TimeoutError):
    """``Client.wait``: the job had not finished within ``timeout_s``; ``.job`` is its last
    read."""

    def __init__(self, job: Job, timeout_s: float) -> None:
        super().__init__(f"job {job.id} is still {job.status.value} after waiting {timeout_s:g}s")
        self.job = job


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


class HookFailed(Exception):
    """A job hook (``before_job``, ``after_job``, ``middleware``) raised ``error``: the job's
    failure, retried (or not) as ``error`` would be, with the hook named in ``last_error``."""

    def __init__(self, kind: str, hook: str, error: Exception) -> None:
        super().__init__(f"{kind} hook {hook} failed: {type(error).__name__}: {error}")
        self.kind = kind
        self.hook = hook
        self.error = error


class RetryAfter(HandlerFailure):
    """Raise from a handler to retry after ``delay_s`` seconds (capped by
    ``worker.retry_cap_s``) instead of the exponential backoff; it still counts as an attempt."""

    def __init__(self, delay_s: float, message: str = "asked to retry later") -> None:
        super().__init__("retry_after", message, retry_after_s=delay_s)
