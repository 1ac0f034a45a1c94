"""Named SQL queries and numbered migrations, loaded from the ``gochatd.sql`` package."""

from __future__ import annotations

import re
from dataclasses import dataclass
from functools import cache
from importlib import resources

JOB_COLUMNS: tuple[str, ...] = (
    "id", "tenant_id", "job_type", "queue", "payload", "status", "priority", "attempts",
    "max_attempts", "scheduled_at", "created_at", "updated_at", "fence", "idempotency_key",
    "locked_by", "locked_at", "lease_expires_at", "last_error", "error_class", "failed_at",
    "completed_at", "dispatched_at", "traceparent", "cancel_requested",
)

#: The reply_outbox columns the outbox store decodes, in order ({outbox_columns}).
OUTBOX_COLUMNS: tuple[str, ...] = (
    "id", "tenant_id", "job_id", "channel", "recipient", "body", "dedupe_key", "status",
    "attempts", "next_attempt_at", "lease_owner", "lease_expires_at", "provider_message_id",
    "error_class", "created_at", "updated_at", "sent_at",
)

#: SQLite's clock as epoch seconds with millisecond precision.
SQLITE_NOW = "((julianday('now') - 2440587.5) * 86400.0)"

_NAME = re.compile(r"^--\s*name:\s*(\w+)\s*$", re.MULTILINE)
_MIGRATION = re.compile(r"^(\d{4})_(\w+)\.up\.sql$")


@cache
def load_queries(dialect: str) -> dict[str, str]:
    text = resources.files("gochatd.sql").joinpath(dialect, "queries.sql").read_text("utf-8")
    parts = _NAME.split(text)
    queries: dict[str, str] = {}
    cols = ", ".join(JOB_COLUMNS)
    cols_j = ", ".join(f"j.{c}" for c in JOB_COLUMNS)
    for name, body in zip(parts[1::2], parts[2::2], strict=True):
        sql = body.strip().rstrip(";").strip()
        sql = sql.replace("{job_columns_j}", cols_j).replace("{job_columns}", cols)
        sql = sql.replace("{outbox_columns_o}", ", ".join(f"o.{c}" for c in OUTBOX_COLUMNS))
        sql = sql.replace("{outbox_columns}", ", ".join(OUTBOX_COLUMNS))
        queries[name] = sql.replace("{now}", SQLITE_NOW)
    # Blocks named "_…" are fragments that other queries include as {_name}.
    fragments = {
        name: "\n".join(line for line in sql.splitlines() if not line.startswith("--"))
        for name, sql in queries.items() if name.startswith("_")
    }
    for name, sql in queries.items():
        # A fragment may include another (_finish_update includes _in_tenant_scope).
        for _ in range(len(fragments) + 1):
            expanded = sql
            for fragment, text in fragments.items():
                expanded = expanded.replace("{" + fragment + "}", text)
            if expanded == sql:
                break
            sql = expanded
        queries[name] = sql
    return queries


@dataclass(frozen=True, slots=True)
class Migration:
    version: int
    name: str
    up_sql: str


@cache
def load_migrations(dialect: str) -> tuple[Migration, ...]:
    folder = resources.files("gochatd.sql").joinpath(dialect)
    found = []
    for entry in folder.iterdir():
        match = _MIGRATION.match(entry.name)
        if match:
            found.append(Migration(int(match.group(1)), match.group(2), entry.read_text("utf-8")))
    return tuple(sorted(found, key=lambda m: m.version))
