"""Change numbers (migration 0007): the safe horizon, and reading what changed above it.

Every write to a migrated table draws a number from one counter (``change_seq``); a delete
leaves a tombstone with its number. Catch-up applies the numbers in (applied, H] where H is
the *safe horizon*: a number such that every write numbered <= H has finished (committed or
rolled back), so nothing at or below it can still appear.

PostgreSQL draws numbers from a sequence outside transactions, so a number can be drawn by a
transaction that commits much later. The horizon is the sequence's value read *before* a
snapshot of the running transactions, once none of those is still in progress: the trigger
takes a transaction id before it draws, so every writer holding a number <= H is in that
snapshot. SQLite serialises writers, so its committed counter is already safe.

The snapshot lists the writing transactions of the whole server, not only this database's
(telling them apart safely would need extra privileges), so a long transaction anywhere on
the server holds the horizon until it ends.
"""

from __future__ import annotations

import time
from collections.abc import Iterator
from typing import Any

from gochatd.migrate.backends import Database, MigrateError, query
from gochatd.migrate.canonical import Row
from gochatd.migrate.tables import Table

#: How long the horizon waits for writers that hold a number (a transaction open longer
#: than this, e.g. a stuck foreign producer, stops the migration with a clear error).
HORIZON_TIMEOUT_S = 60.0
_POLL_S = 0.02
#: Above every change number (bigint): "everything after".
MAX_SEQ = 2**63 - 1
#: The schema version that numbers changes (sql/<dialect>/0007_change_tracking).
CHANGE_TRACKING_VERSION = 7


def tracks_changes(db: Database) -> bool:
    return db.schema_version() >= CHANGE_TRACKING_VERSION


def safe_horizon(db: Database, timeout_s: float = HORIZON_TIMEOUT_S,
                 poll_s: float = _POLL_S) -> int:
    """The highest change number below which every write has finished (see module doc)."""
    if not db.idle():
        # Inside a snapshot the counter and the snapshot would be read at different moments
        # than this function's ordering needs.
        raise RuntimeError("safe_horizon needs a connection outside any transaction")
    counter = db.change_counter()
    if db.dialect != "postgres":
        return counter
    # Read after the counter: every transaction that drew a number <= counter has an xid
    # that is either finished or listed in this snapshot. Reading it takes no xid.
    snapshot = db.fetch(query(db.dialect, "current_snapshot"))[0][0]
    deadline = time.monotonic() + timeout_s
    while db.fetch(query(db.dialect, "snapshot_in_progress"), {"snapshot": snapshot})[0][0]:
        if time.monotonic() >= deadline:
            raise MigrateError(
                f"the {db.endpoint.role} {db.endpoint.masked}: a transaction that may hold "
                f"a change number has been open too long (still running after {timeout_s:g} "
                "s); finish or cancel it (pg_stat_activity.backend_xid, any database of that "
                "server), then re-run")
        time.sleep(poll_s)
    return counter


def iter_changes(db: Database, table: Table, tenant: str | None, after: int, upto: int,
                 batch_size: int) -> Iterator[list[tuple[int, Row]]]:
    """Batches of (change_seq, row) in (after, upto], in change order (keyset on the number,
    so a row that changes again meanwhile moves above ``upto`` and waits for the next round)."""
    while True:
        batch = db.read_changes(table, tenant, after, upto, batch_size)
        if not batch:
            return
        yield batch
        after = batch[-1][0]


def iter_tombstones(db: Database, table: Table, tenant: str | None, after: int, upto: int,
                    batch_size: int) -> Iterator[list[tuple[int, Any]]]:
    """Batches of (change_seq, key) of deletes in (after, upto], in change order."""
    while True:
        batch = db.tombstones(table, tenant, after, upto, batch_size)
        if not batch:
            return
        yield batch
        after = batch[-1][0]


def iter_changed_keys(db: Database, table: Table, tenant: str | None, after: int, upto: int,
                      batch_size: int) -> Iterator[list[tuple[int, Any]]]:
    while True:
        batch = db.changed_keys(table, tenant, after, upto, batch_size)
        if not batch:
            return
        yield batch
        after = batch[-1][0]


def keys_changed_after(db: Database, table: Table, tenant: str | None, after: int,
                       batch_size: int, upto: int = MAX_SEQ) -> set[Any]:
    """Every key written or deleted with a number in (after, upto]."""
    keys = {key for batch in iter_changed_keys(db, table, tenant, after, upto, batch_size)
            for _, key in batch}
    keys.update(key for batch in iter_tombstones(db, table, tenant, after, upto, batch_size)
                for _, key in batch)
    return keys
