"""The validate phase: counts and SHA-256 per tenant and table, on both sides.

Both sides are walked in key order at once (a merge join), so the first differing keys
come out of the same pass as the checksums. Keys name rows; their contents never appear.

Under live writes it compares at a watermark W: the source is read in one snapshot, and
the keys changed or deleted above W in that snapshot ("in flight": the destination has not
been caught up to them) are left out on both sides. W is the catch-up's applied horizon
(or the one given); without one it is the source's counter, so nothing is left out and this
is the plain full comparison of a quiet source.
"""

from __future__ import annotations

import hashlib
from collections.abc import Collection, Iterator, Sequence
from typing import Any

from gochatd.migrate.backends import Database
from gochatd.migrate.canonical import canonical_bytes
from gochatd.migrate.catch_up import applied_watermark
from gochatd.migrate.changes import keys_changed_after, tracks_changes
from gochatd.migrate.state import DONE, FAILED, RUNNING, StateStore
from gochatd.migrate.tables import Table

PHASE = "validate"
#: How many differing keys a report names per table.
MAX_DIFF_KEYS = 5


def _keyed_rows(db: Database, table: Table, tenant: str | None, batch_size: int,
                exclude: Collection[Any]) -> Iterator[tuple[Any, bytes]]:
    after: Any = table.first_key
    while True:
        batch = db.read_batch(table, tenant, after, batch_size)
        if not batch:
            return
        for row in batch:
            if row[table.key] not in exclude:
                yield row[table.key], canonical_bytes(row)
        after = batch[-1][table.key]


class _Side:
    def __init__(self, rows: Iterator[tuple[Any, bytes]]) -> None:
        self._rows = rows
        self.digest = hashlib.sha256()
        self.count = 0
        self.current: tuple[Any, bytes] | None = None
        self.advance()

    def advance(self) -> None:
        self.current = next(self._rows, None)
        if self.current is not None:
            self.digest.update(self.current[1])
            self.digest.update(b"\n")
            self.count += 1


def compare_table(source: Database, destination: Database, table: Table,
                  tenant: str | None, batch_size: int = 1000, *,
                  exclude: Collection[Any] = frozenset()) -> dict[str, Any]:
    """Counts, checksums and the first differing keys over the rows whose key is not in
    ``exclude``."""
    src = _Side(_keyed_rows(source, table, tenant, batch_size, exclude))
    dst = _Side(_keyed_rows(destination, table, tenant, batch_size, exclude))
    differing: list[Any] = []
    while src.current is not None or dst.current is not None:
        if dst.current is None or (src.current is not None and src.current[0] < dst.current[0]):
            _note(differing, src.current[0])  # type: ignore[index]
            src.advance()
        elif src.current is None or dst.current[0] < src.current[0]:
            _note(differing, dst.current[0])
            dst.advance()
        else:
            if src.current[1] != dst.current[1]:
                _note(differing, src.current[0])
            src.advance()
            dst.advance()
    source_sum, destination_sum = src.digest.hexdigest(), dst.digest.hexdigest()
    result: dict[str, Any] = {
        "source": {"count": src.count, "sha256": source_sum},
        "destination": {"count": dst.count, "sha256": destination_sum},
        "equal": src.count == dst.count and source_sum == destination_sum,
    }
    if differing:
        result["first_differing_keys"] = {table.key: differing}
    return result


def _note(keys: list[Any], key: Any) -> None:
    if len(keys) < MAX_DIFF_KEYS:
        keys.append(key)


def validate_scope(
    source: Database, destination: Database, *, scope: str, tables: Sequence[Table],
    state: StateStore, destination_label: str, batch_size: int = 1000,
    watermark: int | None = None,
) -> dict[str, Any]:
    """Compare one scope at a watermark (see the module doc): ``watermark`` if given, else
    the catch-up's applied horizon for this destination, else the source's counter. The
    report names the watermark used and how many in-flight keys were left out."""
    report: dict[str, Any] = {"scope": scope, "tables": {}}
    state.put(scope, PHASE, destination_label, RUNNING, report)
    tracked = tracks_changes(source)
    if watermark is None and tracked:
        watermark = applied_watermark(state, scope, destination_label)
    tenant = scope or None
    # State goes through the source's connection too: only the reads are in the snapshot.
    with source.snapshot():
        counter = source.change_counter() if tracked else None
        at = counter if watermark is None or counter is None else min(watermark, counter)
        for table in tables:
            in_flight = (keys_changed_after(source, table, tenant, at, batch_size)
                         if at is not None else set())
            entry = compare_table(source, destination, table, tenant, batch_size,
                                  exclude=in_flight)
            entry["excluded_in_flight"] = len(in_flight)
            report["tables"][table.name] = entry
    report.update(watermark=at, counter=counter, excluded_in_flight=sum(
        t["excluded_in_flight"] for t in report["tables"].values()))
    report["equal"] = all(t["equal"] for t in report["tables"].values())
    state.put(scope, PHASE, destination_label, DONE if report["equal"] else FAILED, report)
    return report


# -- the delta check of cutover ----------------------------------------------------------
# With writes frozen, every key the source changed since the last validated watermark is
# compared row by row with the destination, plus the counts: validate proved the keys
# untouched since its watermark equal, this proves the touched ones. A row missing on one
# side is a difference.


def delta_check(source: Database, destination: Database, *, scope: str,
                tables: Sequence[Table], since: int,
                batch_size: int = 1000) -> dict[str, Any]:
    """{"scope", "since", "equal", "tables": {name: {"checked", "different" (first keys),
    "different_count", "source_count", "destination_count", "equal"}}}."""
    tenant = scope or None
    report: dict[str, Any] = {"scope": scope, "since": since, "tables": {}}
    with source.snapshot():
        for table in tables:
            report["tables"][table.name] = _check_table(source, destination, table, tenant,
                                                        since, batch_size)
    report["equal"] = all(t["equal"] for t in report["tables"].values())
    return report


def _check_table(source: Database, destination: Database, table: Table, tenant: str | None,
                 since: int, batch_size: int) -> dict[str, Any]:
    keys = sorted(keys_changed_after(source, table, tenant, since, batch_size))
    different: list[Any] = []
    count = 0
    for at in range(0, len(keys), batch_size):
        chunk = keys[at:at + batch_size]
        here = _canonical(source, table, tenant, chunk)
        there = _canonical(destination, table, tenant, chunk)
        for key in chunk:
            if here.get(key) != there.get(key):
                count += 1
                if len(different) < MAX_DIFF_KEYS:
                    different.append(key)
    source_count = source.count(table, tenant)
    destination_count = destination.count(table, tenant)
    return {"checked": len(keys), "different": different, "different_count": count,
            "source_count": source_count, "destination_count": destination_count,
            "equal": count == 0 and source_count == destination_count}


def _canonical(db: Database, table: Table, tenant: str | None,
               keys: Sequence[Any]) -> dict[Any, bytes]:
    return {row[table.key]: canonical_bytes(row) for row in db.read_keys(table, tenant, keys)}
