"""``gochatd migrate start|cutover|rollback|run``: the phases that move a tenant's route
while the fleet keeps running (phases.py), and ``run``, which chains every phase.

Exit codes as the other migrate commands: 0 done, 2 bad input or a refused step (one line
on stderr), 3 validation found differences (cutover blocked), 1 a database failed mid-way.
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Callable
from typing import Any

from gochatd.migrate.backends import Database
from gochatd.migrate.catch_up import catch_up_scope
from gochatd.migrate.cli_support import destination_ready, finish, label, note, scopes, source_state
from gochatd.migrate.copy import copy_scope
from gochatd.migrate.phases import (
    Context,
    CutoverBlocked,
    Move,
    adopt_new_scopes,
    cutover,
    cutover_watermark,
    not_cut_over,
    rollback,
    start,
    validate_move,
)
from gochatd.migrate.progress import Progress
from gochatd.migrate.report import Report
from gochatd.migrate.route_control import (
    RouteRow,
    destination_writes_after,
    fleet_acks,
    get_route,
    list_routes,
)
from gochatd.migrate.routing.view import ROUTES_SCHEMA
from gochatd.migrate.schema import check_source
from gochatd.migrate.state import DatabaseStateStore
from gochatd.store.route_table import EVERY_TENANT, RouteState

EXIT_DIFFERENT = 3
DEFAULT_WINDOW_S = 3600.0
DEFAULT_ACK_TIMEOUT_S = 30.0
#: Catch-up rounds ``run`` allows before it validates (each round takes what arrived during
#: the previous one, so under steady load the lag shrinks to one round's worth).
RUN_CATCH_UP_ROUNDS = 5


def _seconds(text: str) -> float:
    value = float(text)
    if not 0 <= value <= 30 * 86400:
        raise ValueError
    return value


_seconds.__name__ = "a number of seconds (0-2592000)"


def add_live_arguments(name: str, parser: argparse.ArgumentParser) -> None:
    """The options of the live commands, beyond the scope and batch options all share."""
    if name in ("start", "cutover", "rollback", "run"):
        parser.add_argument("--ack-timeout", type=_seconds, default=DEFAULT_ACK_TIMEOUT_S,
                            metavar="S", help="how long to wait for every running daemon to "
                            f"acknowledge a route change (default {DEFAULT_ACK_TIMEOUT_S:g})")
    if name in ("cutover", "run"):
        parser.add_argument("--window", type=_seconds, default=DEFAULT_WINDOW_S, metavar="S",
                            help="after cutover the source stays read-only and rollback is "
                            f"allowed for this long (default {DEFAULT_WINDOW_S:g})")
    if name == "run":
        parser.add_argument("--cutover", action="store_true",
                            help="go on to cutover once validation passes")


def moves(args: argparse.Namespace, source: Database, report: Report) -> list[Move]:
    covered = scopes(args, source, report)
    if args.tenants is None:
        return [Move(EVERY_TENANT, tuple(covered))]
    return [Move(scope, ((scope, tables),)) for scope, tables in covered]


def _context(args: argparse.Namespace, source: Database, destination: Database,
             report: Report, progress: Progress | None = None) -> Context:
    state = source_state(source, report, dry_run=False)

    def say(line: str) -> None:
        if progress is not None:
            progress.done()
        sys.stderr.write(f"gochatd: {line}\n")
        report.notes.append(line)

    return Context(source, destination, state, destination.endpoint.masked,
                   batch_size=getattr(args, "batch_size", 1000),
                   ack_timeout_s=args.ack_timeout, say=say)


def _dry_run(args: argparse.Namespace, source: Database, destination: Database) -> int:
    """start/cutover/rollback with --dry-run: what the step would do now, writing nothing."""
    report = Report(args.migrate_command, source.endpoint, destination.endpoint, dry_run=True)
    check_source(source)
    tracked = source.schema_version() >= ROUTES_SCHEMA
    live = len(fleet_acks(source, 0).acked) if tracked else 0
    for move in moves(args, source, report):
        route = get_route(source, move.key) if tracked else None
        now = route.state.value if route is not None else "none"
        line = f"{move.label}: route {now}; "
        if args.migrate_command == "start":
            line += (f"would route it to tracking from change {source.change_counter()} "
                     if tracked else "would upgrade the source's schema and start tracking ")
            line += f"and wait for {live} live daemon(s)"
        elif args.migrate_command == "cutover":
            line += ("would validate, freeze its writes, catch up, check and route it to the "
                     "destination" if now in ("tracking", "frozen")
                     else "would refuse: no migration in progress" if now != "destination"
                     else "already cut over")
        else:
            line += _rollback_preview(source, destination, move, route)
        print(line)
        report.scopes.append({"route": move.key, "state": now, "would": line})
    finish(args, report)
    return 0


def _rollback_preview(source: Database, destination: Database, move: Move,
                      route: RouteRow | None) -> str:
    if route is None or route.state not in (RouteState.DESTINATION, RouteState.FROZEN):
        return f"would refuse: {not_cut_over(source, move)}"
    if route.state is RouteState.FROZEN:
        return "would abandon the unfinished cutover (back to the source)"
    if route.window_over:
        return "would refuse: the read-only window is over"
    since = cutover_watermark(DatabaseStateStore(source), move, destination.endpoint.masked)
    if since is None:
        return "would refuse: no cutover record for this destination"
    writes = destination_writes_after(destination, move.tenant, since)
    if writes:
        return f"would refuse: the destination has {writes} write(s) of its own since the cutover"
    return "would validate both sides and route it back to the source"


def _route_step(args: argparse.Namespace, source: Database, destination: Database | None,
                step: Callable[[Context, Move], dict[str, Any]]) -> int:
    """start, cutover and rollback: the same frame around one step per move."""
    assert destination is not None
    if args.dry_run:
        return _dry_run(args, source, destination)
    report = Report(args.migrate_command, source.endpoint, destination.endpoint, dry_run=False)
    check_source(source)
    todo = moves(args, source, report)
    if args.migrate_command == "start":
        destination_ready(destination, report, migrate=True, dry_run=False)
    ctx = _context(args, source, destination, report)
    try:
        for move in todo:
            report.scopes.append(step(ctx, move))
    except CutoverBlocked as exc:
        return _blocked(args, report, exc)
    finish(args, report)
    return 0


def cmd_start(args: argparse.Namespace, source: Database, destination: Database | None) -> int:
    return _route_step(args, source, destination, start)


def cmd_cutover(args: argparse.Namespace, source: Database,
                destination: Database | None) -> int:
    def step(ctx: Context, move: Move) -> dict[str, Any]:
        adopt_new_scopes(ctx, move)
        return cutover(ctx, move, window_s=args.window)

    return _route_step(args, source, destination, step)


def cmd_rollback(args: argparse.Namespace, source: Database,
                 destination: Database | None) -> int:
    return _route_step(args, source, destination, rollback)


def _blocked(args: argparse.Namespace, report: Report, exc: CutoverBlocked) -> int:
    report.scopes.append({"blocked": str(exc), "checks": exc.checks})
    finish(args, report)
    sys.stderr.write(f"gochatd: {exc}\n")
    return EXIT_DIFFERENT


def cmd_run(args: argparse.Namespace, source: Database, destination: Database | None) -> int:
    """start -> copy -> catch-up -> validate [-> cutover], per move, with progress bars."""
    assert destination is not None
    if args.dry_run:
        return _run_dry(args, source, destination)
    report = Report("run", source.endpoint, destination.endpoint, dry_run=False)
    check_source(source)
    todo = moves(args, source, report)
    destination_ready(destination, report, migrate=True, dry_run=False)
    progress = Progress()
    ctx = _context(args, source, destination, report, progress)
    for move in todo:
        route = get_route(source, move.key)
        if route is not None and route.state is RouteState.DESTINATION:
            ctx.say(f"{move.label}: already cut over to {route.destination}")
            continue
        if route is None or route.state is not RouteState.FROZEN:
            report.scopes.append({"phase": "start", **start(ctx, move)})
        if move.key == EVERY_TENANT:  # tenants that appeared meanwhile come along
            move = moves(args, source, report)[0]
            adopt_new_scopes(ctx, move)
        entry: dict[str, Any] = {"route": move.key}
        entry["copy"] = _copy(ctx, move, progress)
        entry["catch_up"] = _catch_up(ctx, move, progress)
        entry["validate"], equal = _validate(ctx, move, progress)
        report.scopes.append(entry)
        if not equal:
            finish(args, report)
            sys.stderr.write(f"gochatd: {move.label}: validation found differences; see the "
                             "report (cutover not attempted)\n")
            return EXIT_DIFFERENT
        if args.cutover:
            try:
                entry["cutover"] = cutover(ctx, move, window_s=args.window,
                                           validated=entry["validate"])
            except CutoverBlocked as exc:
                return _blocked(args, report, exc)
    progress.done()
    finish(args, report)
    if not args.cutover:
        sys.stderr.write("gochatd: validated; the source keeps serving: run with --cutover "
                         "(or 'gochatd move cutover') to switch\n")
    return 0


def _copy(ctx: Context, move: Move, progress: Progress) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for scope, tables in move.scopes:
        totals = {t.name: ctx.source.count(t, scope or None) for t in tables}

        def shown(table: str, rows: int, scope: str = scope,
                  totals: dict[str, int] = totals) -> None:
            progress.update(label(scope), "copy", table, rows, totals.get(table))

        out[scope] = copy_scope(ctx.source, ctx.destination, scope=scope, tables=tables,
                                state=ctx.state, destination_label=ctx.destination_label,
                                batch_size=ctx.batch_size, on_batch=shown)
        for name, entry in out[scope]["tables"].items():
            shown(name, int(entry["rows"]))
    progress.done()
    return out


def _catch_up(ctx: Context, move: Move, progress: Progress) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for scope, tables in move.scopes:
        result = catch_up_scope(ctx.source, ctx.destination, scope=scope, tables=tables,
                                state=ctx.state, destination_label=ctx.destination_label,
                                batch_size=ctx.batch_size, max_rounds=RUN_CATCH_UP_ROUNDS)
        out[scope] = result
        done = result.get("this_run", {})
        progress.update(label(scope), "catch-up", f"lag {result.get('lag', 0)}",
                        int(done.get("rows", 0)) + int(done.get("deletes", 0)), None)
    progress.done()
    return out


def _validate(ctx: Context, move: Move, progress: Progress) -> tuple[dict[str, Any], bool]:
    equal = True
    progress.done()
    out = validate_move(ctx, move)
    for scope, result in out.items():
        for name, entry in result["tables"].items():
            verdict = "equal" if entry["equal"] else "DIFFERENT"
            sys.stderr.write(f"{label(scope)[:20]:20} {'validate':9} {name:24} "
                             f"{entry['source']['count']:>10} rows  {verdict}  sha256 "
                             f"{entry['source']['sha256'][:16]}\n")
        equal = equal and bool(result["equal"])
    return out, equal


def _run_dry(args: argparse.Namespace, source: Database, destination: Database) -> int:
    report = Report("run", source.endpoint, destination.endpoint, dry_run=True)
    check_source(source)
    todo = moves(args, source, report)
    destination_ready(destination, report, migrate=True, dry_run=True)
    state = source_state(source, report, dry_run=True)
    for move in todo:
        route = get_route(source, move.key) if source.schema_version() >= ROUTES_SCHEMA else None
        print(f"{move.label}: route {route.state.value if route else 'none'}; would start "
              "tracking, copy, catch up and validate"
              + (", then cut over" if args.cutover else ""))
        for scope, tables in move.scopes:
            result = copy_scope(source, destination, scope=scope, tables=tables, state=state,
                                destination_label=destination.endpoint.masked, dry_run=True)
            for name, entry in result["tables"].items():
                print(f"{label(scope)[:20]:20} {name:24} would copy {entry['would_copy']} rows")
            report.scopes.append(result)
    finish(args, report)
    return 0


def print_routes(source: Database) -> None:
    """``status``: the routes and how much of the fleet has seen the latest change."""
    routes = list_routes(source)
    if not routes:
        return
    latest = max(r.version for r in routes)
    ack = fleet_acks(source, latest)
    print(f"{'ROUTE':20} {'STATE':12} {'VERSION':>8} DESTINATION")
    for r in routes:
        window = (f" (read-only window {'over' if r.window_over else 'until'} "
                  f"{r.readonly_until:%Y-%m-%d %H:%M:%S} UTC)"
                  if r.readonly_until is not None else "")
        print(f"{label(r.tenant_id) if r.tenant_id != EVERY_TENANT else '* (every tenant)':20} "
              f"{r.state.value:12} {r.version:>8} {r.destination}{window}")
    print(f"daemons: {len(ack.acked)} of {len(ack.acked) + len(ack.waiting)} live have seen "
          f"route version {latest}"
          + (f"; waiting for {', '.join(ack.waiting[:5])}" if ack.waiting else ""))
    print()


__all__ = ["add_live_arguments", "cmd_cutover", "cmd_rollback", "cmd_run", "cmd_start",
           "note", "print_routes"]
