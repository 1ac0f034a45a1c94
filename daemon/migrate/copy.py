"""The copy phase: a tenant's rows, batch by batch in key order, upserted by primary key.

Ids are preserved, so replies keep pointing at their jobs and a replayed batch overwrites
itself. After each batch the last copied key is recorded in the StateStore: a copy killed
at any point resumes from there (the destination write and the state write are separate
transactions, so at worst one batch is copied twice, which upserts make harmless).
"""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence
from typing import Any

from gochatd.migrate.backends import Database
from gochatd.migrate.state import DONE, FAILED, RUNNING, StateStore
from gochatd.migrate.tables import Table

PHASE = "copy"
DEFAULT_BATCH = 1000


def copy_scope(
    source: Database, destination: Database, *, scope: str, tables: Sequence[Table],
    state: StateStore, destination_label: str, batch_size: int = DEFAULT_BATCH,
    dry_run: bool = False, on_batch: Callable[[str, int], None] | None = None,
) -> dict[str, Any]:
    """Copy one tenant's tables (or, with scope ``GLOBAL_SCOPE``, the fleet-wide tables).

    Returns the scope's report: per table the rows copied by this run, the rows copied in
    total, where it resumed from, the seconds spent and rows per second."""
    tenant = scope or None
    previous = state.get(scope, PHASE, destination_label)
    resuming = previous is not None and previous.status != DONE
    progress: dict[str, dict[str, Any]] = (
        {k: dict(v) for k, v in previous.report.get("tables", {}).items()}
        if resuming and previous is not None else {}
    )
    report: dict[str, Any] = {"scope": scope, "resumed": resuming, "tables": progress}
    if dry_run:
        for table in tables:
            progress[table.name] = {"would_copy": source.count(table, tenant)}
        return report
    state.put(scope, PHASE, destination_label, RUNNING, report)
    try:
        for table in tables:
            def checkpoint(table: Table = table) -> None:
                state.put(scope, PHASE, destination_label, RUNNING, report)
                if on_batch is not None:
                    on_batch(table.name, int(progress[table.name]["rows"]))

            _copy_table(source, destination, table, tenant, progress, batch_size, checkpoint)
    except BaseException:
        state.put(scope, PHASE, destination_label, FAILED, report)
        raise
    state.put(scope, PHASE, destination_label, DONE, report)
    return report


def _copy_table(
    source: Database, destination: Database, table: Table, tenant: str | None,
    progress: dict[str, dict[str, Any]], batch_size: int, checkpoint: Any,
) -> None:
    entry = progress.setdefault(table.name, {"last_key": table.first_key, "rows": 0})
    entry["resumed_from"] = entry["last_key"]
    after = entry["last_key"]
    started = time.perf_counter()
    copied = 0
    while True:
        batch = source.read_batch(table, tenant, after, batch_size)
        if not batch:
            break
        destination.write_batch(table, batch)
        after = batch[-1][table.key]
        copied += len(batch)
        entry.update(last_key=after, rows=entry["rows"] + len(batch))
        checkpoint()
    if entry["rows"]:
        destination.advance_sequence(table)
    seconds = time.perf_counter() - started
    entry.update(copied_this_run=copied, seconds=round(seconds, 3),
                 rows_per_s=round(copied / seconds) if seconds > 0 else 0)
