"""Schema checks before rows move: both sides must be at gochatd's latest migration.

Upgrades reuse the daemon's own store (``JobStore.migrate``), so they take the same
advisory lock and record the same versions as ``gochatd db upgrade``.
"""

from __future__ import annotations

import trio

from gochatd.migrate.backends import Database, MigrateError
from gochatd.store import open_store
from gochatd.store.queries import latest_version


def upgrade(db: Database) -> list[str]:
    """Apply pending migrations through the daemon's store; the names applied."""
    db.close()  # SQLite: let the store take the write lock

    async def run() -> list[str]:
        store = open_store(db.endpoint.url)
        await store.open()
        try:
            return await store.migrate()
        finally:
            await store.close()

    return trio.run(run)


def check_source(db: Database) -> int:
    db.connect()  # a missing file or an unreachable server is named before anything else
    version = db.schema_version()
    if version == 0:
        raise MigrateError(f"the source {db.endpoint.masked} has no gochatd schema")
    return version


def check_destination(db: Database, *, migrate: bool, dry_run: bool) -> str | None:
    """Raise unless the destination is ready or may be made ready; a note of what was done."""
    have, need = db.schema_version(), latest_version(db.dialect)
    if have >= need:
        return None
    if dry_run:
        return f"would apply migrations {have + 1}..{need} to the destination"
    if not migrate:
        raise MigrateError(
            f"the destination {db.endpoint.masked} is at schema version {have}, gochatd "
            f"needs {need}: re-run with --upgrade-destination (or run 'gochatd db upgrade' "
            "against it)")
    applied = upgrade(db)
    return "applied to the destination: " + ", ".join(applied)
