"""Claims that respect ``tenants.<id>.max_running`` (used only when some tenant has one).

Both claim paths come here: stream-delivered ids, and polling, which first picks due ids
(skipping tenants already at their limit) and then claims them like delivered ids. In one
transaction: find the limited tenants among the ids; on PostgreSQL take each one's advisory
transaction lock in sorted order (SQLite's BEGIN IMMEDIATE already serialises claimers);
claim with ``claim_jobs_limited``, which caps each limited tenant at max_running minus its
running jobs. Without limited tenants among the ids the plain ``claim_jobs`` runs.

A delivered id refused for its tenant's limit stays queued: its stream entry is acked like
any other unclaimed one, and the sweep (streams) or the next poll claims it once a slot frees.

The functions run on the driver's side of the bridge (one crossing per claim). ``queries`` is
the store's query set under its tenant scope (store/scope.py), read once per claim.
"""

from __future__ import annotations

import json
import sqlite3
from collections.abc import Mapping, Sequence
from typing import Any

from psycopg import Connection

from gochatd.store.scope import QuerySet


def pg_claim_limited(
    conn: Connection[Any], limits: Mapping[str, int], ids: Sequence[int] | None,
    queues: Sequence[str], limit: int, owner: str, lease_s: float, *, backlog: bool = False,
    queries: QuerySet, aging_s: float,
) -> list[tuple[Any, ...]]:
    """``ids``: claim those; None: pick due jobs of ``queues`` first (with ``backlog``:
    only limited tenants' jobs)."""
    tenants, caps = list(limits), list(limits.values())
    q, scope = queries.sql, queries.args
    with conn.transaction():
        if ids is None:
            cur = conn.execute(q["full_tenants"],
                                     {"tenants": tenants, "limits": caps, **scope})
            full = [r[0] for r in cur.fetchall()]
            picked: list[int] = []
            if backlog:
                open_ = [t for t in tenants if t not in full]
                if not open_:
                    return []
                cur = conn.execute(q["pick_limited_due_job_ids"], {
                    "open": open_, "queues": list(queues), "limit": limit, "aging_s": aging_s,
                    **scope})
                picked = [int(r[0]) for r in cur.fetchall()]
                queues = ()
            for queue in queues:
                if len(picked) >= limit:
                    break
                cur = conn.execute(q["pick_due_job_ids"], {
                    "queue": queue, "full": full, "limit": limit - len(picked),
                    "aging_s": aging_s, **scope})
                picked.extend(int(r[0]) for r in cur.fetchall())
            ids = picked
        if not ids:
            return []
        cur = conn.execute(q["limited_tenants_of_jobs"],
                                 {"ids": list(ids), "tenants": tenants, **scope})
        involved = [r[0] for r in cur.fetchall()]
        if not involved:
            cur = conn.execute(q["claim_jobs"], {
                "ids": list(ids), "owner": owner, "lease_s": lease_s, **scope})
            return list(cur.fetchall())
        for tenant in involved:  # sorted by the query: a fixed lock order
            conn.execute(q["lock_tenant_claims"], {"tenant_id": tenant})
        cur = conn.execute(q["claim_jobs_limited"], {
            "ids": list(ids), "tenants": tenants, "limits": caps, "owner": owner,
            "lease_s": lease_s, "aging_s": aging_s, **scope})
        return list(cur.fetchall())


def sqlite_claim_limited(
    conn: sqlite3.Connection, limits: Mapping[str, int], ids: Sequence[int] | None,
    queues: Sequence[str], limit: int, owner: str, lease_s: float, *, backlog: bool = False,
    queries: QuerySet, aging_s: float,
) -> list[Any]:
    pairs = json.dumps([[t, n] for t, n in limits.items()])
    q, scope = queries.sql, queries.args
    conn.execute("BEGIN IMMEDIATE")
    try:
        if ids is None:
            full = [r[0] for r in conn.execute(q["full_tenants"],
                                               {"limits": pairs, **scope})]
            picked: list[int] = []
            if backlog:
                open_ = [t for t in limits if t not in full]
                cursor = conn.execute(q["pick_limited_due_job_ids"], {
                    "open": json.dumps(open_), "queues": json.dumps(list(queues)),
                    "limit": limit, "aging_s": aging_s, **scope})
                picked = [int(r[0]) for r in cursor]
                queues = ()
            for queue in queues:
                if len(picked) >= limit:
                    break
                cursor = conn.execute(q["pick_due_job_ids"], {
                    "queue": queue, "skip_tenants": json.dumps(full),
                    "limit": limit - len(picked), "aging_s": aging_s, **scope})
                picked.extend(int(r[0]) for r in cursor)
            ids = picked
        rows: list[Any] = []
        if ids:
            params = {"ids": json.dumps(list(ids)), "owner": owner, "lease_s": lease_s,
                      "aging_s": aging_s, **scope}
            rows = conn.execute(q["claim_jobs_limited"],
                                {**params, "limits": pairs}).fetchall()
    except BaseException:
        conn.execute("ROLLBACK")
        raise
    conn.execute("COMMIT")
    return rows
