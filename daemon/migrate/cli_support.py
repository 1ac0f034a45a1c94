"""What the ``gochatd migrate`` commands share: which scopes a command covers, the state
store, schema readiness, notes and the report file."""

from __future__ import annotations

import argparse
import sys

from gochatd.migrate.backends import Database, MigrateError
from gochatd.migrate.report import Report, write_report
from gochatd.migrate.schema import check_destination, check_source, upgrade
from gochatd.migrate.state import DatabaseStateStore, MemoryStateStore, StateStore
from gochatd.migrate.tables import GLOBAL_SCOPE, GLOBAL_TABLES, TENANT_TABLES, Table
from gochatd.store.queries import latest_version

GLOBAL_NOTE = ("queue pauses and periodic slots are fleet-wide, not per tenant: "
               "they move with --all only")


def note(report: Report, text: str) -> None:
    report.notes.append(text)
    sys.stderr.write(f"gochatd: {text}\n")


def scopes(args: argparse.Namespace, source: Database,
           report: Report) -> list[tuple[str, tuple[Table, ...]]]:
    """[(scope, tables)] in (tenant_id, table, key) order; the fleet-wide scope is ''."""
    known = source.tenants()
    if args.tenants is None:  # --all (plan defaults to it)
        return [(GLOBAL_SCOPE, GLOBAL_TABLES), *((t, TENANT_TABLES) for t in known)]
    wanted = [t.strip() for t in args.tenants.split(",")]
    if any(not t for t in wanted):
        raise MigrateError("--tenants: empty tenant name in the list")
    for tenant in wanted:
        if tenant not in known:
            raise MigrateError(f"--tenants: unknown tenant {tenant!r}: the source has no "
                               "jobs or outbox messages for it")
    report.notes.append(GLOBAL_NOTE)  # said once the command succeeded (see finish)
    return [(t, TENANT_TABLES) for t in sorted(set(wanted))]


def source_state(source: Database, report: Report, dry_run: bool) -> StateStore:
    version = check_source(source)
    if dry_run:
        return MemoryStateStore()
    if version < latest_version(source.dialect):
        applied = upgrade(source)
        note(report, "applied to the source (it keeps the migration state): "
              + ", ".join(applied))
    return DatabaseStateStore(source)


def destination_ready(destination: Database, report: Report, *, migrate: bool,
                      dry_run: bool) -> bool:
    done = check_destination(destination, migrate=migrate, dry_run=dry_run)
    if done:
        note(report, done)
    return done is None or not dry_run


def label(scope: str) -> str:
    return scope if scope != GLOBAL_SCOPE else "(fleet-wide)"


def finish(args: argparse.Namespace, report: Report) -> None:
    if GLOBAL_NOTE in report.notes:
        sys.stderr.write(f"gochatd: {GLOBAL_NOTE}\n")
    if getattr(args, "report", None):
        write_report(args.report, report)
