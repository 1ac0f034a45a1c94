"""The catch-up phase: apply to the destination every change made in the source since the
start watermark, in rounds, until a round finds nothing (or the lag is small enough).

A round takes the source's safe horizon H and, per table, first deletes the keys of the
tombstones numbered in (applied, H], then upserts the rows numbered in (applied, H] (the
source row as it is now, whole: the source wins). Then applied := H. A row that changes
again during the round moves above H and is picked up by the next round, so rounds are
idempotent and a round replayed after a crash is harmless. Deletes go first so that a key
deleted and written again (a queue paused, resumed and paused) ends present.

Progress is recorded in the StateStore (phase "catch-up") after every batch, including the
position inside an unfinished round, so a catch-up killed at any point resumes there.
"""

from __future__ import annotations

import json
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

from gochatd.migrate.backends import Database, MigrateError
from gochatd.migrate.changes import (
    HORIZON_TIMEOUT_S,
    iter_changed_keys,
    iter_changes,
    iter_tombstones,
    safe_horizon,
)
from gochatd.migrate.copy import DEFAULT_BATCH
from gochatd.migrate.state import DONE, FAILED, RUNNING, StateStore
from gochatd.migrate.tables import GLOBAL_SCOPE, Table

PHASE = "catch-up"
#: The phase whose report holds the start watermark {"watermark": int} (written by start).
START_PHASE = "start"
DEFAULT_MAX_ROUNDS = 20


def recorded_start(state: StateStore, scope: str, destination_label: str) -> int | None:
    """The watermark ``start`` recorded for this scope and destination, if it ran."""
    recorded = state.get(scope, START_PHASE, destination_label)
    mark = recorded.report.get("watermark") if recorded is not None else None
    return mark if isinstance(mark, int) else None


def start_watermark(state: StateStore, scope: str, destination_label: str) -> int:
    mark = recorded_start(state, scope, destination_label)
    if mark is None:
        who = f"tenant {scope!r}" if scope != GLOBAL_SCOPE else "the fleet-wide tables"
        raise MigrateError(f"catch-up: no start watermark for {who} and this destination: "
                           "run `gochatd move start` first")
    return mark


def applied_watermark(state: StateStore, scope: str, destination_label: str) -> int | None:
    """The horizon up to which catch-up has applied every change, if it ever finished a round."""
    recorded = state.get(scope, PHASE, destination_label)
    applied = recorded.report.get("applied") if recorded is not None else None
    return applied if isinstance(applied, int) else None


@dataclass(slots=True)
class _Round:
    source: Database
    destination: Database
    tenant: str | None
    batch_size: int
    progress: dict[str, Any]
    checkpoint: Callable[[], None]

    def apply(self, tables: Sequence[Table]) -> int:
        """Finish the pending round (progress["round"]); the rows and deletes it applied."""
        pending = self.progress["round"]
        done = 0
        for table in tables:
            position = pending["tables"].setdefault(
                table.name, {"deletes_after": self.progress["applied"],
                             "rows_after": self.progress["applied"]})
            done += self._deletes(table, position, pending["horizon"])
            done += self._rows(table, position, pending["horizon"])
        return done

    def _deletes(self, table: Table, position: dict[str, int], horizon: int) -> int:
        done = 0
        for batch in iter_tombstones(self.source, table, self.tenant, position["deletes_after"],
                                     horizon, self.batch_size):
            self.destination.delete_keys(table, self.tenant, [key for _, key in batch])
            position["deletes_after"] = batch[-1][0]
            self._count(table, "deletes", len(batch))
            done += len(batch)
        return done

    def _rows(self, table: Table, position: dict[str, int], horizon: int) -> int:
        done = 0
        for batch in iter_changes(self.source, table, self.tenant, position["rows_after"],
                                  horizon, self.batch_size):
            self.destination.write_batch(table, [row for _, row in batch])
            position["rows_after"] = batch[-1][0]
            self._count(table, "rows", len(batch))
            done += len(batch)
        if done:
            self.destination.advance_sequence(table)
        return done

    def _count(self, table: Table, what: str, n: int) -> None:
        entry = self.progress["tables"].setdefault(table.name, {"rows": 0, "deletes": 0})
        entry[what] += n
        self.progress[what] += n
        self.progress["this_run"][what] += n
        self.checkpoint()


def _progress(state: StateStore, scope: str, destination_label: str,
              start: int) -> dict[str, Any]:
    previous = state.get(scope, PHASE, destination_label)
    if previous is not None and int(previous.report.get("applied", -1)) >= start:
        # The counter only rises, so an applied horizon at or above this start watermark
        # belongs to this migration (a later `start` would have a higher watermark).
        progress: dict[str, Any] = json.loads(json.dumps(previous.report))
        progress["resumed_from"] = progress["applied"]
    else:
        progress = {"applied": start, "rounds": 0, "rows": 0, "deletes": 0, "tables": {},
                    "resumed_from": None}
    progress.update(scope=scope, start_watermark=start,
                    this_run={"rounds": 0, "rows": 0, "deletes": 0})
    return progress


def catch_up_scope(
    source: Database, destination: Database, *, scope: str, tables: Sequence[Table],
    state: StateStore, destination_label: str, batch_size: int = DEFAULT_BATCH,
    dry_run: bool = False, max_rounds: int = DEFAULT_MAX_ROUNDS, until_lag: int = 0,
    horizon_timeout_s: float = HORIZON_TIMEOUT_S,
) -> dict[str, Any]:
    """Apply one scope's changes since its start watermark (scope ``GLOBAL_SCOPE``: the
    fleet-wide tables). Returns the report: applied (the horizon reached), rounds, rows and
    deletes (in total and this run), per table counts, seconds, rows_per_s, counter and lag
    (the source's counter minus applied; it counts every tenant's writes)."""
    start = start_watermark(state, scope, destination_label)
    progress = _progress(state, scope, destination_label, start)
    if dry_run:
        return _dry_run(source, progress, scope or None, tables, batch_size, horizon_timeout_s)
    started = time.perf_counter()
    run = _Round(source, destination, scope or None, batch_size, progress,
                 lambda: state.put(scope, PHASE, destination_label, RUNNING, progress))
    state.put(scope, PHASE, destination_label, RUNNING, progress)
    for table in tables:
        progress["tables"].setdefault(table.name, {"rows": 0, "deletes": 0})
    try:
        while progress["this_run"]["rounds"] < max_rounds:
            # A round resumed after a crash may find its remaining part empty.
            resumed = "round" in progress
            if not resumed:
                horizon = safe_horizon(source, horizon_timeout_s)
                if horizon <= progress["applied"]:
                    break
                progress["round"] = {"horizon": horizon, "tables": {}}
            applied = run.apply(tables)
            progress["applied"] = progress.pop("round")["horizon"]
            progress["rounds"] += 1
            progress["this_run"]["rounds"] += 1
            run.checkpoint()
            if (applied == 0 and not resumed) or source.change_counter() - progress["applied"] <= until_lag:
                break
    except BaseException:
        state.put(scope, PHASE, destination_label, FAILED, progress)
        raise
    seconds = time.perf_counter() - started
    counter = source.change_counter()
    done = progress["this_run"]
    progress.update(seconds=round(seconds, 3), counter=counter,
                    lag=max(0, counter - progress["applied"]),
                    rows_per_s=round(done["rows"] / seconds) if seconds > 0 else 0)
    state.put(scope, PHASE, destination_label, DONE, progress)
    return progress


def _dry_run(source: Database, progress: dict[str, Any], tenant: str | None,
             tables: Sequence[Table], batch_size: int, timeout_s: float) -> dict[str, Any]:
    """Count what a round would apply now; writes nothing, not even state."""
    after = progress["applied"]
    horizon = safe_horizon(source, timeout_s)
    would: dict[str, dict[str, int]] = {}
    for table in tables:
        would[table.name] = {
            "would_upsert": sum(len(b) for b in iter_changed_keys(
                source, table, tenant, after, horizon, batch_size)),
            "would_delete": sum(len(b) for b in iter_tombstones(
                source, table, tenant, after, horizon, batch_size)),
        }
    counter = source.change_counter()
    return {"scope": progress["scope"], "dry_run": True, "applied": after,
            "start_watermark": progress["start_watermark"], "horizon": horizon,
            "tables": would, "counter": counter, "lag": max(0, counter - after)}
