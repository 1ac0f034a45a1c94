"""Named SQL queries and numbered migrations: the one loader of every ``.sql`` file.

A query file is plain SQL in blocks, each starting with a ``-- name: <name>`` line; every
block runs as written, with only the driver's parameters (``%(name)s`` for psycopg, ``:name``
for sqlite3). The store's files are ``sql/<dialect>/queries.sql`` (what a database serving
every tenant runs) and ``queries_scoped.sql`` (the same names with the tenant-scope clause,
store/scope.py); ``gochatd migrate`` has ``migrate.sql`` and the bench its own files.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from functools import cache
from importlib import resources
from importlib.resources.abc import Traversable

JOB_COLUMNS: tuple[str, ...] = (
    "id", "tenant_id", "job_type", "queue", "payload", "status", "priority", "attempts",
    "max_attempts", "scheduled_at", "created_at", "updated_at", "fence", "idempotency_key",
    "locked_by", "locked_at", "lease_expires_at", "last_error", "error_class", "failed_at",
    "completed_at", "dispatched_at", "traceparent", "cancel_requested",
)

#: The reply_outbox columns the outbox store decodes, in order.
OUTBOX_COLUMNS: tuple[str, ...] = (
    "id", "tenant_id", "job_id", "channel", "recipient", "body", "dedupe_key", "status",
    "attempts", "next_attempt_at", "lease_owner", "lease_expires_at", "provider_message_id",
    "error_class", "created_at", "updated_at", "sent_at",
)

#: SQLite's clock as epoch seconds with millisecond precision (written out in the .sql files).
SQLITE_NOW = "((julianday('now') - 2440587.5) * 86400.0)"

_NAME = re.compile(r"^--\s*name:\s*(\w+)\s*$", re.MULTILINE)
_MIGRATION = re.compile(r"^(\d{4})_(\w+)\.up\.sql$")


def parse_queries(text: str) -> dict[str, str]:
    """The named blocks of one file. A block's text ends at its last line of SQL (comment
    lines after it introduce the next section) and loses its final ``;``."""
    parts = _NAME.split(text)
    queries: dict[str, str] = {}
    for name, body in zip(parts[1::2], parts[2::2], strict=True):
        if name in queries:
            raise ValueError(f"query {name!r} is defined twice")
        lines = body.strip().splitlines()
        while lines and (not lines[-1].strip() or lines[-1].lstrip().startswith("--")):
            lines.pop()
        queries[name] = "\n".join(lines).rstrip().rstrip(";").rstrip()
    return queries


def read_queries(file: Traversable) -> dict[str, str]:
    return parse_queries(file.read_text("utf-8"))


@cache
def load_queries(dialect: str, filename: str = "queries.sql") -> dict[str, str]:
    """``sql/<dialect>/<filename>``, parsed once per process."""
    return read_queries(resources.files("gochatd.sql").joinpath(dialect, filename))


@dataclass(frozen=True, slots=True)
class Migration:
    version: int
    name: str
    up_sql: str


@cache
def load_migrations(dialect: str) -> tuple[Migration, ...]:
    """The numbered ``NNNN_name.up.sql`` files, in order. Migrations are forward-only
    (docs/schema.md): there are no down files."""
    folder = resources.files("gochatd.sql").joinpath(dialect)
    found = []
    for entry in folder.iterdir():
        match = _MIGRATION.match(entry.name)
        if match:
            found.append(Migration(int(match.group(1)), match.group(2), entry.read_text("utf-8")))
    return tuple(sorted(found, key=lambda m: m.version))


def latest_version(dialect: str) -> int:
    """The schema version this release needs: its newest migration's number."""
    return max(m.version for m in load_migrations(dialect))
