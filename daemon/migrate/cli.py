"""``gochatd migrate plan|start|copy|catch-up|validate|cutover|rollback|run|status``: move
tenants between backends while the fleet runs (docs/migrate.md). The live phases that change
routes are in live_commands.py.

Exit codes: 0 done (validate: equal), 2 bad input (one line on stderr), 3 validate found
differences (the report names the first differing keys), 1 a database failed mid-way.
"""

from __future__ import annotations

import argparse
import sqlite3
import sys
from typing import Any

import psycopg

from gochatd.cli.parsing import add_group, add_subcommands
from gochatd.errors import GochatdError
from gochatd.migrate.backends import Database, MigrateError, parse_endpoint
from gochatd.migrate.catch_up import catch_up_scope
from gochatd.migrate.cli_support import destination_ready as _destination_ready
from gochatd.migrate.cli_support import finish as _finish
from gochatd.migrate.cli_support import label as _label
from gochatd.migrate.cli_support import scopes as _scopes
from gochatd.migrate.cli_support import source_state as _source_state
from gochatd.migrate.copy import DEFAULT_BATCH, copy_scope
from gochatd.migrate.live_commands import (
    add_live_arguments,
    cmd_cutover,
    cmd_rollback,
    cmd_run,
    cmd_start,
    print_routes,
)
from gochatd.migrate.report import Report
from gochatd.migrate.schema import check_source
from gochatd.migrate.state import DatabaseStateStore
from gochatd.migrate.validate import validate_scope
from gochatd.obs.logs import configure_logging
from gochatd.store.queries import latest_version

EXIT_DIFFERENT = 3


class MigrationFailed(GochatdError):
    """A database error in the middle of a phase (exit 1); re-running resumes."""


def _batch_size(text: str) -> int:
    value = int(text)
    if not 1 <= value <= 100_000:
        raise ValueError
    return value


_batch_size.__name__ = "a batch size (1-100000)"


def add_parser(sub: Any) -> None:
    mig = add_group(sub, "move", cmd_move, aliases=["migrate"],
                    help="move tenants between backends")
    mig_sub = add_subcommands(mig, "migrate_command")
    helps = {
        "plan": "counts per tenant and table that would move",
        "copy": "copy tenants' rows (upserts; resumes after a crash)",
        "validate": "compare counts and SHA-256 per tenant and table",
        "status": "the recorded state of every phase",
        "catch-up": "apply the source's changes since `start` to the destination",
        "start": "route tenants to tracking and wait for every daemon (the barrier)",
        "cutover": "freeze, catch up, check, then serve tenants from the destination",
        "rollback": "serve cut-over tenants from the source again (if nothing was lost)",
        "run": "start, copy, catch-up and validate (and cutover with --cutover)",
    }
    for name, text in helps.items():
        p = mig_sub.add_parser(name, help=text)
        p.add_argument("--from", dest="source", metavar="URL", required=True,
                       help="source database: postgresql://… or sqlite:///path")
        p.add_argument("--to", dest="destination", metavar="URL", required=name != "status",
                       help="destination database")
        if name == "status":
            continue
        scope = p.add_mutually_exclusive_group(required=name != "plan")
        scope.add_argument("--tenants", metavar="A,B", help="these tenants only")
        scope.add_argument("--all", action="store_true",
                           help="every tenant, plus queue pauses and periodic slots")
        p.add_argument("--dry-run", action="store_true", help="read only; report what would move")
        p.add_argument("--report", metavar="FILE", help="write the JSON report here")
        if name != "plan":
            p.add_argument("--batch-size", type=_batch_size, default=DEFAULT_BATCH,
                           help=f"rows per batch (default {DEFAULT_BATCH})")
        add_live_arguments(name, p)
        if name == "copy":
            p.add_argument("--upgrade-destination", "--migrate-destination", action="store_true",
                           help="upgrade the destination's schema first")


def cmd_move(args: argparse.Namespace) -> int:
    configure_logging("warning", "json")
    return run_migrate_command(args)


def run_migrate_command(args: argparse.Namespace) -> int:
    source = Database(parse_endpoint("source", args.source))
    destination = (Database(parse_endpoint("destination", args.destination))
                   if args.destination else None)
    if destination is not None and destination.endpoint.identity == source.endpoint.identity:
        raise MigrateError("--from and --to are the same database")
    try:
        return _COMMANDS[args.migrate_command](args, source, destination)
    except (psycopg.Error, sqlite3.Error) as exc:
        text = str(exc).strip().splitlines()
        raise MigrationFailed(f"move {args.migrate_command}: database error: "
                              f"{text[0][:200] if text else type(exc).__name__}; "
                              "re-running resumes") from None
    finally:
        source.close()
        if destination is not None:
            destination.close()


def cmd_plan(args: argparse.Namespace, source: Database, destination: Database | None) -> int:
    assert destination is not None
    report = Report("plan", source.endpoint, destination.endpoint, dry_run=True)
    check_source(source)
    scopes = _scopes(args, source, report)
    ready = _destination_ready(destination, report, migrate=False, dry_run=True)
    print(f"{'TENANT':20} {'TABLE':24} {'SOURCE':>10} {'DESTINATION':>12}")
    for scope, tables in scopes:
        counts: dict[str, Any] = {}
        for table in tables:
            here = source.count(table, scope or None)
            there = destination.count(table, scope or None) if ready else None
            counts[table.name] = {"source": here, "destination": there}
            print(f"{_label(scope)[:20]:20} {table.name:24} {here:>10} "
                  f"{'-' if there is None else there:>12}")
        report.scopes.append({"scope": scope, "tables": counts})
    _finish(args, report)
    return 0


def cmd_copy(args: argparse.Namespace, source: Database, destination: Database | None) -> int:
    assert destination is not None
    report = Report("copy", source.endpoint, destination.endpoint, dry_run=args.dry_run)
    check_source(source)
    scopes = _scopes(args, source, report)  # unknown tenants fail before anything is written
    _destination_ready(destination, report, migrate=args.upgrade_destination,
                       dry_run=args.dry_run)
    state = _source_state(source, report, args.dry_run)
    for scope, tables in scopes:
        result = copy_scope(source, destination, scope=scope, tables=tables, state=state,
                            destination_label=destination.endpoint.masked,
                            batch_size=args.batch_size, dry_run=args.dry_run)
        report.scopes.append(result)
        for name, entry in result["tables"].items():
            if args.dry_run:
                print(f"{_label(scope)[:20]:20} {name:24} would copy {entry['would_copy']} rows")
            else:
                print(f"{_label(scope)[:20]:20} {name:24} {entry['rows']:>10} rows "
                      f"({entry['copied_this_run']} this run, {entry['rows_per_s']} rows/s)")
    _finish(args, report)
    return 0


def cmd_validate(args: argparse.Namespace, source: Database,
                 destination: Database | None) -> int:
    assert destination is not None
    report = Report("validate", source.endpoint, destination.endpoint, dry_run=args.dry_run)
    check_source(source)
    scopes = _scopes(args, source, report)
    if not destination.exists() or destination.schema_version() < latest_version(
            destination.dialect):
        raise MigrateError(f"the destination {destination.endpoint.masked} has no up-to-date "
                           "gochatd schema: nothing was copied to it yet")
    state = _source_state(source, report, args.dry_run)
    different: list[str] = []
    for scope, tables in scopes:
        result = validate_scope(source, destination, scope=scope, tables=tables, state=state,
                                destination_label=destination.endpoint.masked,
                                batch_size=args.batch_size)
        report.scopes.append(result)
        for name, entry in result["tables"].items():
            verdict = "equal" if entry["equal"] else "DIFFERENT"
            print(f"{_label(scope)[:20]:20} {name:24} {entry['source']['count']:>10} "
                  f"{entry['destination']['count']:>10} {verdict} "
                  f"{entry['source']['sha256'][:16]}")
            if not entry["equal"]:
                keys = entry.get("first_differing_keys", {})
                different.append(f"{_label(scope)} {name} {keys}")
    _finish(args, report)
    if different:
        sys.stderr.write(f"gochatd: validate: {len(different)} table(s) differ, first: "
                         f"{different[0]}\n")
        return EXIT_DIFFERENT
    return 0


def cmd_status(args: argparse.Namespace, source: Database,
               destination: Database | None) -> int:
    version = check_source(source)
    if version < latest_version(source.dialect):
        print("no migration recorded (the source has no migration state table yet)")
        return 0
    print_routes(source)
    wanted = destination.endpoint.masked if destination is not None else None
    rows = [s for s in DatabaseStateStore(source).list()
            if wanted is None or s.destination == wanted]
    if not rows:
        print("no migration recorded")
        return 0
    print(f"{'DESTINATION':50} {'TENANT':20} {'PHASE':9} {'STATUS':8} {'UPDATED':20} DETAIL")
    for s in rows:
        updated = s.updated_at.strftime("%Y-%m-%d %H:%M:%S") if s.updated_at else "-"
        print(f"{s.destination[:50]:50} {_label(s.tenant)[:20]:20} {s.phase:9} {s.status:8} "
              f"{updated:20} {_detail(s.report)}")
    return 0


def _detail(report: dict[str, Any]) -> str:
    tables = report.get("tables", {})
    parts = []
    for name, entry in tables.items():
        if "rows" in entry:
            parts.append(f"{name}={entry['rows']}")
        elif "equal" in entry:
            parts.append(f"{name}={'equal' if entry['equal'] else 'DIFFERENT'}")
    # The live phases: where tracking starts, how long writes were frozen, the fleet.
    for key, label in (("watermark", "watermark"), ("applied", "applied"), ("lag", "lag"),
                       ("frozen_s", "frozen_s"), ("destination_writes", "destination_writes")):
        if key in report:
            parts.append(f"{label}={report[key]}")
    fleet = report.get("fleet_destination") or report.get("fleet")
    if isinstance(fleet, dict) and "acked" in fleet:
        parts.append(f"daemons={fleet['acked']}/{fleet['live']}")
    return " ".join(parts)


def cmd_catch_up(args: argparse.Namespace, source: Database,
                 destination: Database | None) -> int:
    assert destination is not None
    report = Report("catch-up", source.endpoint, destination.endpoint, dry_run=args.dry_run)
    version = check_source(source)
    scopes = _scopes(args, source, report)
    if version < latest_version(source.dialect):
        raise MigrateError(f"the source {source.endpoint.masked} has no migration recorded: "
                           "run `gochatd move start` first")
    if not destination.exists() or destination.schema_version() < latest_version(
            destination.dialect):
        raise MigrateError(f"the destination {destination.endpoint.masked} has no up-to-date "
                           "gochatd schema: run `gochatd move copy` first")
    # --dry-run reads the recorded watermarks too; catch_up_scope then writes nothing.
    state = DatabaseStateStore(source)
    for scope, tables in scopes:
        result = catch_up_scope(source, destination, scope=scope, tables=tables, state=state,
                                destination_label=destination.endpoint.masked,
                                batch_size=args.batch_size, dry_run=args.dry_run)
        report.scopes.append(result)
        for name, entry in result["tables"].items():
            if args.dry_run:
                print(f"{_label(scope)[:20]:20} {name:24} would apply "
                      f"{entry['would_upsert']} rows, {entry['would_delete']} deletes")
            else:
                print(f"{_label(scope)[:20]:20} {name:24} {entry['rows']:>10} rows "
                      f"{entry['deletes']:>8} deletes")
        if args.dry_run:
            print(f"{_label(scope)[:20]:20} lag {result['lag']} (applied {result['applied']}, "
                  f"horizon {result['horizon']})")
        else:
            done = result["this_run"]
            print(f"{_label(scope)[:20]:20} lag {result['lag']} (applied {result['applied']}; "
                  f"this run: {done['rounds']} rounds, {done['rows']} rows, "
                  f"{done['deletes']} deletes, {result['rows_per_s']} rows/s)")
    _finish(args, report)
    return 0


_COMMANDS = {"plan": cmd_plan, "copy": cmd_copy, "validate": cmd_validate, "status": cmd_status}
_COMMANDS["catch-up"] = cmd_catch_up
_COMMANDS.update(start=cmd_start, cutover=cmd_cutover, rollback=cmd_rollback, run=cmd_run)

