"""Unique jobs (docs/unique-jobs.md): enqueueing a request that carries a ``unique_key``.

Within a tenant the key is held by at most one row: a unique index over
(tenant_id, unique_key) where the key is set (migration 0013). The holder *counts* while it
is queued, retrying or running, or completed before its ``unique_until`` (its enqueue time
plus ``unique_for_s``, by the database clock). An enqueue of a taken key inserts nothing
(``enqueue_unique_job``: ON CONFLICT DO NOTHING) and looks the holder up:

- it counts: the enqueue returns it (``created=False``; a different payload is not a
  conflict: the key says what "the same work" is);
- it no longer counts: it gives the key up (``release_unique_key``, an UPDATE guarded by the
  same rule) and the INSERT is tried again.

Two producers racing for one key cannot both insert: the index admits one row, and the
loser of the INSERT (PostgreSQL waits for the winner's transaction) finds the winner's
row. Of two that release the same stale holder, one UPDATE writes and the other matches
nothing; both then try the INSERT, where the index decides again. An idempotency key is
checked first: a request that has both and whose idempotency key is taken is an idempotent
replay (and may be a conflict), as without a unique key.

The caller runs this on its connection, inside its transaction (SQLite: ``BEGIN
IMMEDIATE``) or statement by statement (PostgreSQL autocommit); ``fetch`` runs one named
query and returns its first row.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from typing import Any

from gochatd.errors import StoreUnavailable
from gochatd.model import EnqueueRequest, EnqueueResult, Job
from gochatd.store.rows import same_job

#: INSERT, look-up, release rounds before giving up (each round another writer has to win a
#: race against this one; two suffice unless rows are deleted meanwhile).
ATTEMPTS = 5

Fetch = Callable[[str, Mapping[str, Any]], Sequence[Any] | None]


def enqueue_unique(fetch: Fetch, queries: Mapping[str, str], request: EnqueueRequest,
                   params: Mapping[str, Any], to_job: Callable[[Sequence[Any]], Job]
                   ) -> EnqueueResult:
    """Insert ``request`` unless its keys are held; ``conflict`` marks an idempotency key
    held by a different job (the caller raises or reports it)."""
    params = {**params, "unique_key": request.unique_key, "unique_for_s": request.unique_for_s}
    for _ in range(ATTEMPTS):
        row = fetch(queries["enqueue_unique_job"], params)
        if row is not None:
            return EnqueueResult(to_job(row), created=True)
        if request.idempotency_key is not None:
            row = fetch(queries["find_idempotent_job"], params)
            if row is not None:
                job = to_job(row)
                return EnqueueResult(job, created=False,
                                     conflict=not same_job(job, request.job_type, request.payload))
        if request.unique_key is None:
            continue  # the idempotent row was deleted between the two statements
        row = fetch(queries["find_unique_job"], params)
        if row is None:
            continue  # the holder was deleted (retention) in between
        if row[-1]:
            return EnqueueResult(to_job(row), created=False)
        fetch(queries["release_unique_key"], {"id": row[0], "unique_key": request.unique_key})
    raise StoreUnavailable(f"enqueue of unique key raced with other writers {ATTEMPTS} times")
