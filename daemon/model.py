"""The job record and its one state machine.

Every status change in gochatd is one of the edges in ``TRANSITIONS``. The stores encode the
same edges as compare-and-set SQL (``WHERE status = …``); the contract tests check each store
operation against this table.

Which loop moves a job out of each status:

- ``queued``    -> ``running``: a consumer (stream entry) or the poller claims it.
- ``running``   -> ``completed`` | ``retrying`` | ``dead`` | ``cancelled``: the runner,
  fenced by (lease_owner, fence); or the lease reaper once the lease expires.
- ``retrying``  -> ``running``: claimed again once ``scheduled_at`` is due.
- ``dead``      -> ``queued``: an operator's manual retry.
- ``queued`` | ``retrying`` -> ``cancelled``: an operator's cancel.
- ``queued`` | ``retrying`` -> ``dead``: an operator's discard (``discarded``; never runs).
- ``cancelled`` -> ``queued``: an operator's manual retry.

Two operator controls change no status (docs/operations.md, "Job controls"): run now (a job
not yet due is due now) and delete (any status but ``running``: cancel a running job first).
"""

from __future__ import annotations

import enum
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any, TypeVar

from gochatd.errors import InvalidJob

E = TypeVar("E", bound=enum.Enum)

MAX_ID = 2**63 - 1  #: every bound on a job, batch or outbox row id: a PostgreSQL bigint


class JobStatus(enum.StrEnum):
    QUEUED = "queued"
    RUNNING = "running"
    RETRYING = "retrying"
    COMPLETED = "completed"
    DEAD = "dead"
    CANCELLED = "cancelled"


CLAIMABLE: frozenset[JobStatus] = frozenset({JobStatus.QUEUED, JobStatus.RETRYING})
TERMINAL: frozenset[JobStatus] = frozenset(
    {JobStatus.COMPLETED, JobStatus.DEAD, JobStatus.CANCELLED}
)

#: worker.priority_aging_s's default: waiting this long raises a job one priority step
#: (docs/priority.md).
DEFAULT_PRIORITY_AGING_S = 10.0

TRANSITIONS: dict[JobStatus, frozenset[JobStatus]] = {
    JobStatus.QUEUED: frozenset({JobStatus.RUNNING, JobStatus.CANCELLED, JobStatus.DEAD}),
    JobStatus.RETRYING: frozenset({JobStatus.RUNNING, JobStatus.CANCELLED, JobStatus.DEAD}),
    JobStatus.RUNNING: frozenset(
        {JobStatus.COMPLETED, JobStatus.RETRYING, JobStatus.DEAD, JobStatus.CANCELLED}
    ),
    JobStatus.DEAD: frozenset({JobStatus.QUEUED}),
    JobStatus.CANCELLED: frozenset({JobStatus.QUEUED}),
    JobStatus.COMPLETED: frozenset(),
}


def can_transition(src: JobStatus, dst: JobStatus) -> bool:
    return dst in TRANSITIONS[src]


class Outcome(enum.StrEnum):
    """How one execution ended, as the runner saw it."""

    COMPLETED = "completed"
    RETRY = "retry"  # retryable failure, counts as an attempt
    DEAD = "dead"  # non-retryable failure or attempts exhausted
    CANCELLED = "cancelled"  # operator asked for it
    INTERRUPTED = "interrupted"  # shutdown: back to retrying, attempt refunded


OUTCOME_STATUS: dict[Outcome, JobStatus] = {
    Outcome.COMPLETED: JobStatus.COMPLETED,
    Outcome.RETRY: JobStatus.RETRYING,
    Outcome.DEAD: JobStatus.DEAD,
    Outcome.CANCELLED: JobStatus.CANCELLED,
    Outcome.INTERRUPTED: JobStatus.RETRYING,
}


def enum_member(kind: type[E], value: object, field_name: str) -> E:
    """``value`` as a member of ``kind``: a member, or its value as a string (``"dead"``);
    anything else is refused with ``InvalidJob`` naming the field and the allowed values.
    Every public dataclass and method that takes an enum takes it through here."""
    if isinstance(value, kind):
        return value
    if isinstance(value, str):
        try:
            return kind(value)
        except ValueError:
            pass
    allowed = ", ".join(str(m.value) for m in kind)
    raise InvalidJob(f"{field_name}: expected one of {allowed}")


def record_to_dict(record: Any) -> dict[str, Any]:
    """A row dataclass as JSON-ready fields: times as ISO 8601, enums as their values."""
    out: dict[str, Any] = {}
    for name in record.__dataclass_fields__:
        value = getattr(record, name)
        if isinstance(value, datetime):
            value = value.isoformat()
        elif isinstance(value, enum.Enum):
            value = value.value
        out[name] = value
    return out


@dataclass(frozen=True, slots=True)
class Job:
    """A row of ``background_jobs`` as the stores return it."""

    id: int
    tenant_id: str
    job_type: str
    queue: str
    payload: dict[str, Any]
    status: JobStatus
    priority: int
    attempts: int
    max_attempts: int
    scheduled_at: datetime
    created_at: datetime
    updated_at: datetime
    fence: int = 0
    idempotency_key: str | None = None
    locked_by: str | None = None
    locked_at: datetime | None = None
    lease_expires_at: datetime | None = None
    last_error: str | None = None
    error_class: str | None = None
    failed_at: datetime | None = None
    completed_at: datetime | None = None
    dispatched_at: datetime | None = None
    traceparent: str | None = None
    cancel_requested: bool = False
    #: The handler's return value (JSON), stored with the completion (docs/results.md).
    result: Any = None

    def to_dict(self) -> dict[str, Any]:
        return record_to_dict(self)


class AttemptOutcome(enum.StrEnum):
    """How a run ended, as ``job_attempts`` records it: the status the fenced finish wrote,
    or how the run was taken back (store/attempts.py)."""

    COMPLETED = "completed"
    RETRYING = "retrying"
    DEAD = "dead"
    CANCELLED = "cancelled"
    LEASE_EXPIRED = "lease_expired"  # the reaper took the expired lease back
    INTERRUPTED = "interrupted"  # daemon shutdown: back to retrying, attempt refunded


@dataclass(frozen=True, slots=True)
class JobAttempt:
    """One run of a job (``job_attempts``); ``attempt``: the job's fence at its claim."""

    attempt: int
    started_at: datetime | None
    finished_at: datetime | None
    worker: str | None
    outcome: AttemptOutcome
    error_class: str | None = None
    error: str | None = None

    def to_dict(self) -> dict[str, Any]:
        return record_to_dict(self)


@dataclass(frozen=True, slots=True)
class ClaimedJob:
    """What a claim hands to the runner: the job plus the lease it now holds."""

    job: Job
    lease_owner: str
    fence: int

    @property
    def id(self) -> int:
        return self.job.id


@dataclass(frozen=True, slots=True)
class DispatchRef:
    """What a stream entry carries: enough to find the row, never the payload."""

    job_id: int
    job_type: str
    queue: str
    tenant_id: str


@dataclass(frozen=True, slots=True)
class Reply:
    """A reply a handler asked for (``ctx.reply``): goes to the outbox with the completion."""

    channel: str
    recipient: str
    body: dict[str, Any]
    dedupe_key: str


@dataclass(frozen=True, slots=True)
class Finish:
    """One fenced state change requested by a runner."""

    job_id: int
    lease_owner: str
    fence: int
    outcome: Outcome
    #: The job's tenant: the database that holds it while tenants move (migrate/routing/store.py).
    tenant_id: str
    delay_s: float = 0.0
    error_class: str | None = None
    last_error: str | None = None
    #: Replies the handler produced; written only with a completion that applies.
    replies: tuple[Reply, ...] = ()
    #: The handler's result as JSON text (results/encode.py), stored only by a completion
    #: that applies; None: no result.
    result: str | None = None

    @property
    def status(self) -> JobStatus:
        return OUTCOME_STATUS[self.outcome]


@dataclass(frozen=True, slots=True)
class EnqueueRequest:
    job_type: str
    payload: dict[str, Any]
    #: None: the queue a daemon published for the type (docs/job-types.md), else "default";
    #: the store resolves it in the INSERT.
    queue: str | None = None
    tenant_id: str = "default"
    idempotency_key: str | None = None
    delay_s: float | None = None
    scheduled_at: datetime | None = None
    #: None: the type's published max_attempts, else 25 (as ``queue``).
    max_attempts: int | None = None
    priority: int = 0
    traceparent: str | None = None
    #: Unique jobs (docs/unique-jobs.md): the key the job holds within its tenant, and how
    #: long after its enqueue a completed holder still counts (None: only while waiting or
    #: running).
    unique_key: str | None = None
    unique_for_s: float | None = None
    dispatch_now: bool = False  # the client XADDs the row itself right after commit
    payload_json: str | None = None  # validation's canonical text: the INSERT takes it as is


@dataclass(frozen=True, slots=True)
class EnqueueResult:
    """``job`` is the new row (``created``), the existing row of the same idempotency key or
    the live holder of the same unique key (not ``created``) or, with ``conflict``, the row
    that holds the idempotency key for a different job type or payload (only
    ``enqueue_many`` reports that; nothing was written for the item)."""

    job: Job
    created: bool
    conflict: bool = False


#: Run by a store on its connection thread right after an enqueue committed, with the
#: results (the client XADDs there, so one enqueue is one thread hop).
AfterCommit = Callable[[Sequence[EnqueueResult]], None]


@dataclass(frozen=True, slots=True)
class Lease:
    job_id: int
    fence: int
    #: As Finish.tenant_id.
    tenant_id: str


@dataclass(frozen=True, slots=True)
class LeaseState:
    """Heartbeat answer for one held lease."""

    job_id: int
    cancel_requested: bool


@dataclass(frozen=True, slots=True)
class ReapResult:
    """One reap pass: the jobs sent back to retrying (with their dispatch), the ids gone dead."""

    retried: list[DispatchRef] = field(default_factory=list)
    dead: list[int] = field(default_factory=list)

    @property
    def count(self) -> int:
        return len(self.retried) + len(self.dead)


@dataclass(frozen=True, slots=True)
class JobFilter:
    status: JobStatus | None = None
    queue: str | None = None
    tenant_id: str | None = None
    job_type: str | None = None
    limit: int = 100
    #: The cursor: the last id of the previous page (in the chosen order).
    after_id: int | None = None
    #: Newest first (the admin API's default), not oldest first.
    newest_first: bool = False
    #: Search text (at most ``MAX_SEARCH_CHARS``): an id, or a piece of the type, tenant or payload.
    search: str | None = None
    #: Only waiting jobs not yet due, soonest first (the order flag is then moot).
    scheduled: bool = False

    def __post_init__(self) -> None:  # JobFilter(status="dead") is JobStatus.DEAD
        if self.status is not None:
            object.__setattr__(self, "status", enum_member(JobStatus, self.status, "status"))


MAX_SEARCH_CHARS = 200  # the longest search text a listing takes


@dataclass(frozen=True, slots=True)
class QueueStats:
    """One queue's depth, as the admin API and metrics show it."""

    queue: str
    queued: int = 0  # due now
    delayed: int = 0  # queued, not yet due (a retrying job counts once: under retrying)
    running: int = 0
    retrying: int = 0
    dead: int = 0
    oldest_due_age_s: float | None = None


class JobAction(enum.StrEnum):
    """An operator's control over a job or a bulk selection (docs/operations.md)."""

    RETRY = "retry"
    CANCEL = "cancel"
    DELETE = "delete"
    DISCARD = "discard"
    RUN_NOW = "run_now"


#: The statuses each control acts on; its guarded SQL changes only rows still in one of them.
ACTION_STATUSES: dict[JobAction, frozenset[JobStatus]] = {
    JobAction.RETRY: frozenset({JobStatus.DEAD, JobStatus.CANCELLED}),
    JobAction.CANCEL: frozenset({JobStatus.QUEUED, JobStatus.RETRYING, JobStatus.RUNNING}),
    JobAction.DELETE: frozenset(JobStatus) - {JobStatus.RUNNING},
    JobAction.DISCARD: CLAIMABLE,
    JobAction.RUN_NOW: CLAIMABLE,
}


@dataclass(frozen=True, slots=True)
class JobSelection:
    """The jobs a bulk control acts on: those of ``ids`` (when given) matching every filter
    given, in the control's statuses; an empty one is refused (validate_selection)."""

    ids: tuple[int, ...] | None = None
    status: JobStatus | None = None
    queue: str | None = None
    job_type: str | None = None
    tenant_id: str | None = None

    def __post_init__(self) -> None:  # JobSelection(status="dead") is JobStatus.DEAD
        if self.status is not None:
            object.__setattr__(self, "status", enum_member(JobStatus, self.status, "status"))

    @property
    def is_empty(self) -> bool:
        return self.ids is None and not self.filters()

    def filters(self) -> dict[str, str]:
        """The filters given, as the audit line and the admin API name them."""
        given = {"status": self.status.value if self.status else None, "queue": self.queue,
                 "job_type": self.job_type, "tenant_id": self.tenant_id}
        return {k: v for k, v in given.items() if v is not None}


@dataclass(frozen=True, slots=True)
class BulkResult:
    """``matched``: jobs the selection picked in the statuses the control acts on;
    ``changed``: those its guarded writes changed (fewer when some moved on meanwhile)."""

    action: JobAction
    matched: int
    changed: int

    def to_dict(self) -> dict[str, Any]:
        return {"action": self.action.value, "matched": self.matched, "changed": self.changed}
