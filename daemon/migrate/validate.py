"""The validate phase: counts and SHA-256 per tenant and table, on both sides.

Both sides are walked in key order at once (a merge join), so the first differing keys
come out of the same pass as the checksums. Keys name rows; their contents never appear.
"""

from __future__ import annotations

import hashlib
from collections.abc import Iterator, Sequence
from typing import Any

from gochatd.migrate.backends import Database
from gochatd.migrate.canonical import canonical_bytes
from gochatd.migrate.state import DONE, FAILED, RUNNING, StateStore
from gochatd.migrate.tables import Table

PHASE = "validate"
#: How many differing keys a report names per table.
MAX_DIFF_KEYS = 5


def _keyed_rows(db: Database, table: Table, tenant: str | None,
                batch_size: int) -> Iterator[tuple[Any, bytes]]:
    after: Any = table.first_key
    while True:
        batch = db.read_batch(table, tenant, after, batch_size)
        if not batch:
            return
        for row in batch:
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
                  tenant: str | None, batch_size: int = 1000) -> dict[str, Any]:
    src = _Side(_keyed_rows(source, table, tenant, batch_size))
    dst = _Side(_keyed_rows(destination, table, tenant, batch_size))
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
) -> dict[str, Any]:
    report: dict[str, Any] = {"scope": scope, "tables": {}}
    state.put(scope, PHASE, destination_label, RUNNING, report)
    for table in tables:
        report["tables"][table.name] = compare_table(source, destination, table, scope or None,
                                                     batch_size)
    report["equal"] = all(t["equal"] for t in report["tables"].values())
    state.put(scope, PHASE, destination_label, DONE if report["equal"] else FAILED, report)
    return report
