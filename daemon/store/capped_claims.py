"""Claims under caps: ``tenants.<id>.max_running`` and ``worker.queue_limits`` (used only
when some tenant or queue has one; otherwise the plain claim queries run, untouched).

Both claim paths come here: stream-delivered ids (but in a capped queue each entry is a
token of the queue, spent on its best job by level: ``split_delivered``), and polling, which
first picks due ids (skipping tenants already at their cap, and taking at most a capped
queue's free slots) and then claims them like delivered ids. In one transaction: find the
capped queues and tenants among the ids; on PostgreSQL take each one's advisory transaction
lock, the queues' in sorted order and then the tenants' (one order for every claimer: no
deadlock; SQLite's BEGIN IMMEDIATE already serialises claimers); claim with
``claim_jobs_limited``, which caps each tenant at max_running minus its running jobs and
then, among what the tenants allow, each queue likewise. Without capped tenants or queues
among the ids the plain ``claim_jobs`` runs.

A delivered id refused for a cap stays queued: its stream entry is acked like any other
unclaimed one, and the capped backlog (streams, loops/capped_backlog.py) or the next poll
claims it once a slot frees.

The functions run on the driver's side of the bridge (one crossing per claim). ``queries`` is
the store's query set under its tenant scope (store/scope.py), read once per claim.
"""

from __future__ import annotations

import json
import sqlite3
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Protocol

from psycopg import Connection

from gochatd.store.db import sqlite_transaction
from gochatd.store.scope import QuerySet


@dataclass(frozen=True, slots=True)
class Caps:
    """Running jobs allowed fleet-wide per tenant and per queue (the worker's config)."""

    tenants: Mapping[str, int]
    queues: Mapping[str, int]


class _Picks(Protocol):
    """The statements a dialect's capped claim runs to pick due ids."""

    caps: Caps

    def full_tenants(self) -> list[str]: ...
    def free_queue_slots(self) -> dict[str, int]: ...
    def pick_tenant_backlog(self, tenants: list[str], queues: list[str], limit: int
                            ) -> list[int]: ...
    def pick_due(self, queue: str, full: list[str], limit: int) -> list[int]: ...


class _CappedClaim:
    """One capped claim on one connection; a dialect supplies the statements."""

    def __init__(self, caps: Caps, queries: QuerySet, aging_s: float) -> None:
        self.caps = caps
        self.sql = queries.sql
        self.scope = queries.args
        self.aging_s = aging_s

    def pick(self: _Picks, queues: Sequence[str], limit: int, backlog: bool) -> list[int]:
        """Due ids of ``queues`` in the intake's order, none of a full tenant, at most a
        capped queue's free slots of it. ``backlog``: only capped tenants' and queues' jobs
        (their stream entries were refused and acked)."""
        full = self.full_tenants() if self.caps.tenants else []
        room = self.free_queue_slots() if self.caps.queues else {}
        open_queues = [q for q in queues if room.get(q, 1) > 0]
        picked: dict[int, None] = {}  # insertion-ordered, without duplicates
        if backlog:
            open_tenants = [t for t in self.caps.tenants if t not in full]
            if open_tenants and open_queues:
                picked.update(dict.fromkeys(
                    self.pick_tenant_backlog(open_tenants, open_queues, limit)))
            open_queues = [q for q in open_queues if q in room]
        for queue in open_queues:
            if len(picked) >= limit:
                break
            want = min(limit - len(picked), room.get(queue, limit))
            picked.update(dict.fromkeys(self.pick_due(queue, full, want)))
        return list(picked)


class _PgClaim(_CappedClaim):
    def __init__(self, conn: Connection[Any], caps: Caps, queries: QuerySet,
                 aging_s: float) -> None:
        super().__init__(caps, queries, aging_s)
        self.conn = conn

    def _rows(self, name: str, params: dict[str, Any]) -> list[tuple[Any, ...]]:
        return self.conn.execute(self.sql[name], {**params, **self.scope}).fetchall()

    def _firsts(self, name: str, params: dict[str, Any]) -> list[Any]:
        return [r[0] for r in self._rows(name, params)]

    def full_tenants(self) -> list[str]:
        return self._firsts("full_tenants", {"tenants": list(self.caps.tenants),
                                             "limits": list(self.caps.tenants.values())})

    def free_queue_slots(self) -> dict[str, int]:
        rows = self._rows("free_queue_slots", {"queues": list(self.caps.queues),
                                               "limits": list(self.caps.queues.values())})
        return {str(r[0]): int(r[1]) for r in rows}

    def pick_tenant_backlog(self, tenants: list[str], queues: list[str], limit: int) -> list[int]:
        return self._firsts("pick_limited_due_job_ids", {
            "open": tenants, "queues": queues, "limit": limit, "aging_s": self.aging_s})

    def pick_due(self, queue: str, full: list[str], limit: int) -> list[int]:
        return self._firsts("pick_due_job_ids", {
            "queue": queue, "full": full, "limit": limit, "aging_s": self.aging_s})

    def claim(self, ids: list[int], owner: str, lease_s: float) -> list[tuple[Any, ...]]:
        tenants, queues = self.caps.tenants, self.caps.queues
        involved_tenants = self._firsts("limited_tenants_of_jobs", {
            "ids": ids, "tenants": list(tenants)}) if tenants else []
        involved_queues = self._firsts("capped_queues_of_jobs", {
            "ids": ids, "queues": list(queues)}) if queues else []
        if not involved_tenants and not involved_queues:
            return self._rows("claim_jobs", {"ids": ids, "owner": owner, "lease_s": lease_s})
        # Sorted by the queries; queues before tenants: one lock order for every claimer.
        for queue in involved_queues:
            self.conn.execute(self.sql["lock_queue_claims"], {"queue": queue})
        for tenant in involved_tenants:
            self.conn.execute(self.sql["lock_tenant_claims"], {"tenant_id": tenant})
        return self._rows("claim_jobs_limited", {
            "ids": ids, "tenants": list(tenants), "limits": list(tenants.values()),
            "capped_queues": list(queues), "queue_limits": list(queues.values()),
            "owner": owner, "lease_s": lease_s, "aging_s": self.aging_s})


def pg_claim_capped(
    conn: Connection[Any], caps: Caps, ids: Sequence[int] | None,
    queues: Sequence[str], limit: int, owner: str, lease_s: float, *, backlog: bool = False,
    queries: QuerySet, aging_s: float,
) -> list[tuple[Any, ...]]:
    """``ids``: claim those; None: pick due jobs of ``queues`` first (with ``backlog``:
    only capped tenants' and queues' jobs)."""
    claim = _PgClaim(conn, caps, queries, aging_s)
    with conn.transaction():
        picked = list(ids) if ids is not None else claim.pick(queues, limit, backlog)
        return claim.claim(picked, owner, lease_s) if picked else []


def split_delivered(
    delivered: Mapping[str, Sequence[int | None]], capped_queues: Mapping[str, int]
) -> tuple[list[int], dict[str, int]]:
    """A capped stream claim: the ids to claim by name, and per capped queue
    (worker.queue_limits) how many of its best jobs by level to claim instead. In a capped
    queue each entry is a token of the queue, as in a queue with mixed priorities
    (docs/priority.md): what it leaves waiting is the capped backlog's, like a refused
    entry's job. Elsewhere the named ids, each tenant's by level within its cap."""
    named = [job_id for queue, queue_ids in delivered.items() if queue not in capped_queues
             for job_id in queue_ids if job_id is not None]
    tokens = {queue: len(queue_ids) for queue, queue_ids in delivered.items()
              if queue in capped_queues and queue_ids}
    return named, tokens


def _pairs(limits: Mapping[str, int]) -> str:
    return json.dumps([[name, n] for name, n in limits.items()])


class _SqliteClaim(_CappedClaim):
    def __init__(self, conn: sqlite3.Connection, caps: Caps, queries: QuerySet,
                 aging_s: float) -> None:
        super().__init__(caps, queries, aging_s)
        self.conn = conn

    def _rows(self, name: str, params: dict[str, Any]) -> list[Any]:
        return self.conn.execute(self.sql[name], {**params, **self.scope}).fetchall()

    def full_tenants(self) -> list[str]:
        return [r[0] for r in self._rows("full_tenants", {"limits": _pairs(self.caps.tenants)})]

    def free_queue_slots(self) -> dict[str, int]:
        rows = self._rows("free_queue_slots", {"queue_limits": _pairs(self.caps.queues)})
        return {str(r[0]): int(r[1]) for r in rows}

    def pick_tenant_backlog(self, tenants: list[str], queues: list[str], limit: int) -> list[int]:
        return [int(r[0]) for r in self._rows("pick_limited_due_job_ids", {
            "open": json.dumps(tenants), "queues": json.dumps(queues), "limit": limit,
            "aging_s": self.aging_s})]

    def pick_due(self, queue: str, full: list[str], limit: int) -> list[int]:
        return [int(r[0]) for r in self._rows("pick_due_job_ids", {
            "queue": queue, "skip_tenants": json.dumps(full), "limit": limit,
            "aging_s": self.aging_s})]

    def claim(self, ids: list[int], owner: str, lease_s: float) -> list[Any]:
        return self._rows("claim_jobs_limited", {
            "ids": json.dumps(ids), "limits": _pairs(self.caps.tenants),
            "queue_limits": _pairs(self.caps.queues), "owner": owner, "lease_s": lease_s,
            "aging_s": self.aging_s})


def sqlite_claim_capped(
    conn: sqlite3.Connection, caps: Caps, ids: Sequence[int] | None,
    queues: Sequence[str], limit: int, owner: str, lease_s: float, *, backlog: bool = False,
    queries: QuerySet, aging_s: float,
) -> list[Any]:
    claim = _SqliteClaim(conn, caps, queries, aging_s)
    with sqlite_transaction(conn):
        picked = list(ids) if ids is not None else claim.pick(queues, limit, backlog)
        rows = claim.claim(picked, owner, lease_s) if picked else []
    return rows
