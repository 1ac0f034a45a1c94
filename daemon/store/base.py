"""The ``JobStore`` protocol: every backend implements exactly this, and passes
``tests/contract``. All time decisions (due, expired, lease deadlines) use the
database clock; callers pass durations, never timestamps from their own clock."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Protocol

from gochatd.config.rates import QueueRate
from gochatd.model import (
    AfterCommit,
    BulkResult,
    ClaimedJob,
    DispatchRef,
    EnqueueRequest,
    EnqueueResult,
    Finish,
    Job,
    JobAction,
    JobAttempt,
    JobFilter,
    JobSelection,
    JobStatus,
    Lease,
    LeaseState,
    QueueStats,
    ReapResult,
)
from gochatd.outbox.store import OutboxStore
from gochatd.periodic_jobs.slots import PeriodicSlotStore
from gochatd.store.db import AfterFinish
from gochatd.store.fleet import FleetStore
from gochatd.store.job_types import JobTypeStore
from gochatd.store.rate_windows import RateLimitedClaim
from gochatd.store.route_table import RouteTable
from gochatd.worker.runnable import RunnableTypes
from gochatd.workflows.model import Batch, JobLinks, Workflow, WorkflowResult


class JobStore(OutboxStore, PeriodicSlotStore, JobTypeStore, FleetStore, Protocol):
    #: "postgres" or "sqlite"
    dialect: str
    #: True when other processes' inserts can wake this one (LISTEN/NOTIFY).
    has_notifications: bool

    @property
    def control_notifications(self) -> bool:
        """True when pause, route and fleet changes are announced (``wait_for_control``);
        False: the followers read those tables on their short period."""
        ...
    #: tenants.<id>.max_running: both claim paths cap each tenant's running jobs, fleet-wide.
    #: Empty (the default): the plain claim queries run, as fast as without tenants.
    tenant_limits: dict[str, int]
    #: worker.queue_limits: both claim paths cap each queue's running jobs, fleet-wide, and
    #: a job must fit its tenant's cap too. Empty (the default): nothing changes.
    queue_limits: dict[str, int]
    #: worker.priority_aging_s: a waiting job gains one priority step per this many seconds,
    #: up to its queue's top level (docs/priority.md); every claim orders due jobs by it.
    priority_aging_s: float
    #: The job types this daemon can run (daemon/worker/runnable.py): every claim takes only
    #: those. ``ANY_TYPE`` (the default): no filter.
    runnable: RunnableTypes

    async def open(self) -> None: ...
    async def close(self) -> None: ...
    async def migrate(self) -> list[str]:
        """Apply pending migrations; return the names applied (empty when up to date)."""
        ...

    async def schema_version(self) -> int:
        """The highest applied migration, 0 for an empty database."""
        ...

    async def enqueue(
        self, request: EnqueueRequest, *, after_commit: AfterCommit | None = None
    ) -> EnqueueResult:
        """Insert one job (idempotently). ``after_commit`` runs on the store's connection
        thread once the row committed, in the same thread hop (the client XADDs there)."""
        ...

    async def enqueue_many(
        self, requests: Sequence[EnqueueRequest], *, raise_on_conflict: bool = False,
        after_commit: AfterCommit | None = None,
    ) -> list[EnqueueResult]:
        """Insert a batch at once; one result per request, in order. An idempotency conflict
        is reported per item (``conflict=True``, nothing written for it) or, with
        ``raise_on_conflict``, raised as ``IdempotencyConflict`` with nothing written at all."""
        ...

    async def claim_jobs(
        self, ids: Sequence[int], owner: str, lease_s: float
    ) -> list[ClaimedJob]:
        """Claim stream-delivered ids that are still claimable and due."""
        ...

    async def claim_delivered_jobs(
        self, delivered: Mapping[str, Sequence[int | None]], owner: str, lease_s: float
    ) -> list[ClaimedJob]:
        """Streams mode: claim what a batch of stream entries stands for (``delivered``:
        queue -> the ids its entries named), up to one job per entry, in the order of
        docs/priority.md: in a queue whose waiting jobs all have priority 0, the named ids
        themselves; in any other queue, and for entries whose job is gone, the queue's first
        due jobs instead. An entry is a wake-up token of its queue, not a promise of its job;
        None stands for an entry whose id may not be claimed (a duplicate, a job this worker
        runs) but still counts for its queue."""
        ...

    async def claim_due_jobs(
        self, queues: Sequence[str], limit: int, owner: str, lease_s: float
    ) -> list[ClaimedJob]:
        """Polling claim: take up to ``limit`` due jobs, filling ``queues`` in order; within
        a queue in the order of docs/priority.md (priority, aged by the wait)."""
        ...

    async def claim_rate_limited(
        self, queue: str, rate: QueueRate, limit: int, owner: str, lease_s: float,
        *, dispatched_only: bool = False,
    ) -> RateLimitedClaim:
        """A claim of one rate-limited queue (worker.queue_rates): up to ``limit`` due jobs,
        at most what the queue's current window has left fleet-wide, counted in the same
        transaction (store/rate_windows.py). ``dispatched_only``: as claim_due_jobs."""
        ...

    async def finish_jobs(
        self, finishes: Sequence[Finish], *, after_commit: AfterFinish | None = None
    ) -> set[int]:
        """Fenced compare-and-set per row; return the ids applied. Stale ones write nothing.
        ``after_commit`` runs on the store's connection thread once the batch committed, in
        the same thread hop (the finisher XACKs there); a batch written in several units
        (tenants in several databases while they move) does not run it: the caller sees
        that it did not run and does its work itself."""
        ...

    async def extend_leases(
        self, leases: Sequence[Lease], owner: str, lease_s: float
    ) -> list[LeaseState]:
        """Heartbeat; leases not returned are lost."""
        ...

    async def reap_expired_leases(
        self, limit: int = 1000, *, expired_within_s: float | None = None,
        created_after_id: int | None = None,
    ) -> ReapResult:
        """Expired leases back to retrying (or dead, or cancelled); with
        ``expired_within_s`` only those that expired that recently (a keyset window), plus
        the expired ones of rows newer than ``created_after_id``."""
        ...

    async def newest_job_id(self) -> int:
        """The highest job id (0 for none)."""
        ...

    async def next_lease_expiry_in_s(self, expired_within_s: float | None = None
                                     ) -> float | None:
        """Seconds (database clock) until the earliest running job's lease expires
        (negative: expired already); None when no job runs. ``expired_within_s``: only
        leases that expired that recently or later (the reaper's window); None: all."""
        ...

    async def dispatch_due_jobs(self, queues: Sequence[str], limit: int) -> list[DispatchRef]:
        """Mark due, never-dispatched jobs as dispatched now and return them for XADD."""
        ...

    async def redispatch_stale_jobs(
        self, limits: Mapping[str, int], older_than_s: float, *,
        dispatched_within_s: float | None = None,
    ) -> list[DispatchRef]:
        """Waiting jobs last dispatched more than ``older_than_s`` ago, at most
        ``limits[queue]`` of each queue, marked dispatched now for a new XADD (one statement
        for every queue); with ``dispatched_within_s`` only those last dispatched that
        recently (a keyset window)."""
        ...

    async def next_due_in_s(self, queues: Sequence[str], undispatched_only: bool) -> float | None:
        """Seconds (database clock) until the earliest claimable job is due; None if none."""
        ...

    async def get_job(self, job_id: int) -> Job | None: ...
    async def enqueue_workflow(self, workflow: Workflow, *,
                               after_commit: AfterCommit | None = None) -> WorkflowResult:
        """Dependent jobs, chains, batches: every item in one transaction (docs/workflows.md)."""
        ...

    async def job_links(self, job_id: int, with_results: bool = True) -> JobLinks | None:
        """The job's dependencies (their results only ``with_results``), how many it still
        waits on, its batch; None: no such job."""
        ...

    async def get_batch(self, batch_id: int) -> Batch | None: ...
    async def get_job_states(self, job_ids: Sequence[int]) -> dict[int, tuple[int, JobStatus]]:
        """``{id: (fence, status)}`` of those of ``job_ids`` that exist, in one query (the
        finisher's check after a retried write)."""
        ...

    async def list_job_attempts(self, job_id: int) -> list[JobAttempt]:
        """The job's recorded runs, newest first (at most ``ATTEMPTS_KEPT_PER_JOB``,
        store/attempts.py); empty for a job never run, or unknown."""
        ...

    async def list_jobs(self, flt: JobFilter) -> list[Job]:
        """A page of jobs in the filter's order (oldest or newest first by id, or the
        scheduled ones soonest first), after the cursor ``flt.after_id``."""
        ...

    async def requeue_job(self, job_id: int) -> Job:
        """An operator's retry (``jobs retry``): dead or cancelled -> queued, attempts reset."""
        ...

    async def cancel_job(self, job_id: int) -> Job: ...
    async def delete_job(self, job_id: int) -> Job:
        """An operator's delete: the row of a job in any status but running goes (returned as
        it was); ``InvalidTransition`` for a running one, ``JobNotFound``."""
        ...

    async def discard_job(self, job_id: int) -> Job:
        """An operator's discard: queued or retrying -> dead, ``error_class`` ``discarded``,
        without running."""
        ...

    async def run_job_now(self, job_id: int) -> tuple[Job, bool]:
        """An operator's run now: a queued or retrying job not yet due becomes due now
        (database clock) and undispatched, so it is dispatched like any due job. The bool:
        whether this call changed it (False: it was due already)."""
        ...

    async def control_jobs(self, action: JobAction, selection: JobSelection) -> BulkResult:
        """A control in bulk, in batches (store/controls.py): how many jobs the selection
        matched in the statuses the action takes, and how many the guarded writes changed."""
        ...

    async def count_jobs_by_status(self) -> dict[JobStatus, int]: ...
    async def count_scheduled_jobs(self) -> int:
        """Queued or retrying jobs not yet due (database clock)."""
        ...

    async def count_delayed_jobs(self) -> int:
        """Queued jobs not yet due (database clock): ``QueueStats.delayed`` summed."""
        ...

    async def prune_finished_jobs(self, status: JobStatus, older_than_s: float, limit: int) -> int:
        """Retention: delete up to ``limit`` jobs of a terminal ``status`` whose last change
        (``updated_at``) is older than ``older_than_s`` by the database clock; the count."""
        ...

    async def prune_change_tombstones(self, older_than_s: float, limit: int) -> int:
        """Delete up to ``limit`` delete-tombstones (``gochatd migrate``'s change tracking)
        older than ``older_than_s``, unless a move is being tracked; the count."""
        ...

    async def count_prunable_jobs(self, status: JobStatus, older_than_s: float) -> int:
        """How many jobs ``prune_finished_jobs`` would delete (``jobs prune --dry-run``)."""
        ...

    async def requeue_dead_jobs(self, flt: JobFilter) -> list[int]:
        """Bulk requeue (``POST /v1/jobs/retry``): dead jobs matching the filter -> queued
        (at most flt.limit)."""
        ...

    async def pause_queue(self, queue: str, by: str) -> bool:
        """Fleet-wide pause; False if it was already paused."""
        ...

    async def resume_queue(self, queue: str) -> bool: ...
    async def paused_queues(self) -> set[str]: ...
    async def queue_stats(self) -> list[QueueStats]: ...
    async def claim_capped_backlog(
        self, queues: Sequence[str], limit: int, owner: str, lease_s: float
    ) -> list[ClaimedJob]:
        """Streams mode with tenant or queue caps: claim due jobs of capped tenants and
        queues below their cap (their refused stream entries were acked)."""
        ...

    async def running_by_tenant(self) -> dict[str, int]:
        """Running jobs per tenant (fleet-wide), for /v1/tenants and metrics."""
        ...


    async def wait_for_notification(self, timeout_s: float) -> bool:
        """Block until another process announces new work, or the timeout. False on timeout."""
        ...

    async def wait_for_control(self, what: str, timeout_s: float) -> bool:
        """Block until a change of ``what`` ("pauses", "routes", "fleet") is announced, or
        the timeout. False on timeout (always, without ``control_notifications``)."""
        ...


class RoutingStore(JobStore, Protocol):
    """The store the daemon runs on: a ``JobStore`` that also follows the tenant routes of a
    live migration (migrate/routing/store.py; docs/migrate.md). Without routes it is the plain store."""

    async def refresh_routes(self, *, force: bool = False) -> RouteTable:
        """Re-read the routes if they changed (opening the destinations they name)."""
        ...

    async def ack_routes(self, worker_id: str, version: int) -> None:
        """Tell the migrator's barrier this daemon follows route ``version``."""
        ...

    async def forget_route_ack(self, worker_id: str) -> None: ...
