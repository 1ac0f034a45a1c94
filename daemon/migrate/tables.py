"""What a backend migration moves: the tables, their columns and how each column is typed.

Tenant tables move per tenant, ordered by (tenant_id, table, key). The fleet-wide tables
(queue pauses, periodic slots) have no tenant: they move only with ``--all``, because
moving them for one tenant would change every tenant's queues on the destination.
The column lists match sql/<dialect>/0001-0005 and 0019 exactly.

``gochatd_job_types`` (0009) is not moved at all: every daemon publishes its handlers'
defaults into each database it serves from, the destinations included, before it follows a
route there (migrate/routing/store.py, docs/job-types.md).
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True, slots=True)
class Table:
    name: str
    #: The primary key: keyset pagination, upserts, resume position and mismatch reports.
    key: str
    columns: tuple[str, ...]
    #: timestamptz in PostgreSQL, REAL epoch seconds in SQLite.
    timestamps: frozenset[str] = frozenset()
    #: jsonb in PostgreSQL, JSON text in SQLite.
    json_columns: frozenset[str] = frozenset()
    #: boolean in PostgreSQL, 0/1 in SQLite.
    booleans: frozenset[str] = frozenset()
    tenant_scoped: bool = True
    #: The key is an integer fed by a sequence (bigserial / AUTOINCREMENT).
    serial_key: bool = True

    @property
    def first_key(self) -> int | str:
        """A value below every key: where a fresh copy starts."""
        return 0 if self.serial_key else ""


BACKGROUND_JOBS = Table(
    name="background_jobs",
    key="id",
    columns=(
        "id", "tenant_id", "job_type", "queue", "payload", "status", "priority", "attempts",
        "max_attempts", "scheduled_at", "idempotency_key", "locked_by", "locked_at",
        "last_error", "error_class", "failed_at", "completed_at", "created_at", "updated_at",
        "fence", "lease_expires_at", "dispatched_at", "traceparent", "cancel_requested",
        "unique_key", "unique_until", "result", "waits_on", "has_dependents", "batch_id",
    ),
    timestamps=frozenset({
        "scheduled_at", "locked_at", "failed_at", "completed_at", "created_at", "updated_at",
        "lease_expires_at", "dispatched_at", "unique_until",
    }),
    json_columns=frozenset({"payload", "result"}),
    booleans=frozenset({"cancel_requested", "has_dependents"}),
)

REPLY_OUTBOX = Table(
    name="reply_outbox",
    key="id",
    columns=(
        "id", "tenant_id", "job_id", "channel", "recipient", "body", "dedupe_key", "status",
        "attempts", "next_attempt_at", "lease_owner", "lease_expires_at",
        "provider_message_id", "error_class", "created_at", "updated_at", "sent_at",
    ),
    timestamps=frozenset({
        "next_attempt_at", "lease_expires_at", "created_at", "updated_at", "sent_at",
    }),
    json_columns=frozenset({"body"}),
)

#: Workflows (migration 0019, docs/workflows.md): a dependent's edges, each to a job it
#: waits for. Ids are kept like the jobs' (the edges name jobs by id).
JOB_DEPENDENCIES = Table(
    name="gochatd_job_dependencies",
    key="id",
    columns=("id", "tenant_id", "job_id", "depends_on_id", "run_if_failed", "resolved_status"),
    booleans=frozenset({"run_if_failed"}),
)

#: A batch's row; its members carry its id in ``background_jobs.batch_id``.
BATCHES = Table(
    name="gochatd_batches",
    key="id",
    columns=("id", "tenant_id", "size", "on_success_id", "on_complete_id", "created_at"),
    timestamps=frozenset({"created_at"}),
)

QUEUE_PAUSES = Table(
    name="gochatd_queue_pauses",
    key="queue",
    columns=("queue", "paused_at", "paused_by"),
    timestamps=frozenset({"paused_at"}),
    tenant_scoped=False,
    serial_key=False,
)

PERIODIC_SLOTS = Table(
    name="gochatd_periodic_slots",
    key="name",
    columns=("name", "last_slot", "updated_at"),
    timestamps=frozenset({"last_slot", "updated_at"}),
    tenant_scoped=False,
    serial_key=False,
)

#: Per tenant, in this order.
TENANT_TABLES: tuple[Table, ...] = (BACKGROUND_JOBS, REPLY_OUTBOX, JOB_DEPENDENCIES, BATCHES)
#: Fleet-wide: with ``--all`` only.
GLOBAL_TABLES: tuple[Table, ...] = (QUEUE_PAUSES, PERIODIC_SLOTS)
#: The tenant id under which the fleet-wide tables are reported and tracked (no real tenant
#: can have it: tenant ids are 1-200 characters).
GLOBAL_SCOPE = ""
