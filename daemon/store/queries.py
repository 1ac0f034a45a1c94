"""Named SQL queries and numbered migrations: the one loader of every ``.sql`` file.

A query file is plain SQL in blocks, each starting with a ``-- name: <name>`` line; every
block runs as written, with only the driver's parameters (``%(name)s`` for psycopg, ``:name``
for sqlite3). The store's file is ``sql/<dialect>/queries.sql``, each query written once; a
query that acts across tenants marks where the tenant scope goes with an SQL comment
(``/* AND scope */``, docs/schema.md "The scoped set"). Loading drops the markers (the plain
set: what a database serving every tenant runs) and expands them once into the scoped set
(``load_scoped_queries``, store/scope.py). ``gochatd migrate`` has ``migrate.sql`` and the
bench its own files.
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
#: A place for the tenant scope: ``/* AND scope */``, ``/* AND scope(j) */`` (on ``j.tenant_id``),
#: ``/* WHERE scope */``; and SQLite's ``/* next_change */`` (a scoped write numbers itself).
_MARK = r"/\* (?:(?P<kw>AND|WHERE) scope(?:\((?P<alias>\w+)\))?|(?P<next>next_change)) \*/"
#: A marker alone on its line (the line goes with it), else one inside a line.
_OWN_LINE = re.compile(rf"\n(?P<indent>[ \t]*){_MARK}[ \t]*(?=\n|\Z)")
_IN_LINE = re.compile(rf"[ \t]*{_MARK}")
#: What the markers expand to, per dialect (``{col}``: the scoped table's tenant_id; ``{br}``:
#: a space inside a line, a new line under the clause on a marker's own line).
_SCOPE = {
    "postgres": "(CASE WHEN %(scope_only)s::bool THEN {col} = ANY(%(scope_tenants)s::text[])"
                "{br}ELSE {col} <> ALL(%(scope_tenants)s::text[]) END)",
    "sqlite": "(({col} IN (SELECT value FROM json_each(:scope_tenants))) = :scope_only)",
}
_NEXT_CHANGE = {
    "sqlite": ", change_seq = (SELECT value + 1 FROM gochatd_change_counter WHERE id = 1)",
}
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


def plain_sql(sql: str) -> str:
    """``sql`` with its scope markers left out: the query a database serving every tenant runs."""
    return _IN_LINE.sub("", _OWN_LINE.sub("", sql))


def scoped_sql(sql: str, dialect: str) -> str:
    """``sql`` with each marker expanded: the tenant-scope clause (two more parameters,
    ``scope_only`` and ``scope_tenants``) and, on SQLite, the write's own change number."""

    def fill(match: re.Match[str], br: str = " ") -> str:
        if match.group("next"):
            if dialect not in _NEXT_CHANGE:
                raise ValueError(f"/* next_change */ has no meaning in {dialect}")
            return _NEXT_CHANGE[dialect]
        alias = match.group("alias")
        col = f"{alias}.tenant_id" if alias else "tenant_id"
        return f"{match.group('kw')} {_SCOPE[dialect].format(col=col, br=br)}"

    def own_line(match: re.Match[str]) -> str:
        if match.group("next"):
            raise ValueError("/* next_change */ belongs inside a line, after the SET it extends")
        indent = match.group("indent")
        return "\n" + indent + fill(match, br="\n" + indent + " " * 6)

    def in_line(match: re.Match[str]) -> str:
        return fill(match) if match.group("next") else f" {fill(match)}"

    return _IN_LINE.sub(in_line, _OWN_LINE.sub(own_line, sql))


def is_scoped(sql: str) -> bool:
    """Whether ``sql`` marks a place for the tenant scope (acts across tenants)."""
    return any(m.group("kw") for m in re.finditer(_MARK, sql))


@cache
def _marked_queries(dialect: str, filename: str) -> dict[str, str]:
    return read_queries(resources.files("gochatd.sql").joinpath(dialect, filename))


@cache
def load_queries(dialect: str, filename: str = "queries.sql") -> dict[str, str]:
    """``sql/<dialect>/<filename>``, parsed once per process, scope markers left out."""
    return {name: plain_sql(sql) for name, sql in _marked_queries(dialect, filename).items()}


@cache
def load_scoped_queries(dialect: str, filename: str = "queries.sql") -> dict[str, str]:
    """The queries of ``sql/<dialect>/<filename>`` that mark a tenant scope, expanded once
    per process: the set a store runs while it serves only some tenants (store/scope.py)."""
    return {name: scoped_sql(sql, dialect)
            for name, sql in _marked_queries(dialect, filename).items() if is_scoped(sql)}


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
