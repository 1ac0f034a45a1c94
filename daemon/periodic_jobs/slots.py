"""Periodic-slot records (``gochatd_periodic_slots``) and the fenced enqueue of a slot.

``claim_periodic_slot`` moves a periodic job's ``last_slot`` forward with a compare-and-set;
only the caller whose statement moved it enqueues the slot's job, in the same transaction.
Two daemons waking for the same slot therefore enqueue it once, and a slot already recorded
is never enqueued again, even after its job was pruned. The functions run on the thread
that owns the connection, so one slot is one thread hop.
"""

from __future__ import annotations

import sqlite3
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Any, Protocol

from psycopg import Connection

from gochatd.model import EnqueueRequest, Job
from gochatd.store.core import StoreCore
from gochatd.store.db import Db, PgDb, SqliteDb, sqlite_transaction
from gochatd.store.enqueue_many import pg_enqueue_many, sqlite_enqueue_params
from gochatd.store.queries import load_queries
from gochatd.store.rows import database_time

PG = load_queries("postgres")
SQLITE = load_queries("sqlite")


@dataclass(frozen=True, slots=True)
class SlotClaim:
    """``claimed``: this caller moved the record; ``job``: the row it enqueued, if any (None
    when the slot was skipped, or its idempotency key already named a job)."""

    claimed: bool
    job: Job | None = None


class PeriodicSlotStore(Protocol):
    async def database_now(self) -> datetime:
        """The database clock."""
        ...

    async def periodic_slots(self) -> dict[str, datetime]:
        """Every periodic job's last handled slot."""
        ...

    async def claim_periodic_slot(
        self, name: str, slot: datetime, request: EnqueueRequest | None
    ) -> SlotClaim:
        """Move ``name``'s record to ``slot`` if it is behind; if this call moved it and
        ``request`` is given, enqueue it in the same transaction."""
        ...


class SqlPeriodicOps(StoreCore):
    """Mixed into ``SqlJobStore``: the reads both backends share (``_read``)."""

    async def database_now(self) -> datetime:
        rows = await self._read("database_now", {})
        return database_time(rows[0][0])

    async def periodic_slots(self) -> dict[str, datetime]:
        rows = await self._read("list_periodic_slots", {})
        return {str(r[0]): database_time(r[1]) for r in rows}


def claim_periodic_slot(db: Db, name: str, slot: datetime, request: EnqueueRequest | None
                        ) -> SlotClaim:
    """The slot's record and its job in one transaction (the unit of ``claim_periodic_slot``)."""
    if isinstance(db, PgDb):
        with db.transaction():
            return pg_claim_periodic_slot(db.conn, name, slot, request)
    assert isinstance(db, SqliteDb)
    return sqlite_claim_periodic_slot(db.conn, name, slot, request, db.job)


def pg_claim_periodic_slot(
    conn: Connection[Any], name: str, slot: datetime, request: EnqueueRequest | None
) -> SlotClaim:
    """Connection thread, inside a transaction the caller opened."""
    cur = conn.execute(PG["claim_periodic_slot"], {"name": name, "slot": slot})
    if cur.fetchone() is None:
        return SlotClaim(False)
    if request is None:
        return SlotClaim(True)
    [result] = pg_enqueue_many(conn, [request], False)
    return SlotClaim(True, result.job if result.created else None)


def sqlite_claim_periodic_slot(
    conn: sqlite3.Connection, name: str, slot: datetime, request: EnqueueRequest | None,
    to_job: Callable[[Sequence[Any]], Job],
) -> SlotClaim:
    """Store thread: one ``BEGIN IMMEDIATE`` transaction."""
    with sqlite_transaction(conn):
        row = conn.execute(
            SQLITE["claim_periodic_slot"], {"name": name, "slot": slot.timestamp()}
        ).fetchone()
        claim = SlotClaim(row is not None)
        if row is not None and request is not None:
            inserted = conn.execute(SQLITE["enqueue_job"], sqlite_enqueue_params(request)).fetchone()
            claim = SlotClaim(True, to_job(inserted) if inserted is not None else None)
    return claim
