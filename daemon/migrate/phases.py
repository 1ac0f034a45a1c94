"""The live phases of a move: start (the barrier), cutover and rollback.

A move is one route row (a tenant, or ``*`` for ``--all``) and the scopes it carries (the
tenant's tables; with ``--all`` every tenant plus the fleet-wide tables). Copy, catch-up
and validate run per scope (copy.py, catch_up.py, validate.py); these phases change the
route, so they run per move. Each records its progress in the StateStore under every scope
of the move and can be re-run after a crash at any point:

- start: change tracking is installed in both databases (a database that never took part in
  a move runs without it), the route goes to ``tracking``, the source watermark is recorded
  (the first re-run keeps it), then the fleet barrier. Writes are tracked by the database's
  triggers whatever the route says, so none is untracked while the barrier forms.
- cutover: ``frozen`` (daemons hold the tenant's writes; the source refuses them), barrier,
  final catch-up, a row-by-row check of everything changed since the last validation, the
  destination's own watermark, then ``destination`` with a read-only window for the source.
  A crash leaves the route frozen; re-running cutover finishes it, rollback abandons it.
- rollback: only from ``destination`` (or an unfinished cutover), only while the destination
  has no write of its own since the cutover and the read-only window is open, and only
  after a full validation shows both sides equal.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

from gochatd.migrate.backends import Database, MigrateError
from gochatd.migrate.catch_up import catch_up_scope, recorded_start
from gochatd.migrate.changes import safe_horizon
from gochatd.migrate.route_control import (
    FleetAck,
    destination_writes_after,
    get_route,
    prepare_source,
    prepare_tracking,
    route_url,
    separate_ids,
    set_route,
    wait_for_fleet,
)
from gochatd.migrate.state import DONE, FAILED, RUNNING, StateStore
from gochatd.migrate.tables import GLOBAL_SCOPE, TENANT_TABLES, Table
from gochatd.migrate.validate import delta_check, validate_scope
from gochatd.store.route_table import EVERY_TENANT, RouteState

START, CUTOVER, ROLLBACK = "start", "cutover", "rollback"
VALIDATE, CATCH_UP = "validate", "catch-up"


class CutoverBlocked(MigrateError):
    """Validation found a difference: the cutover was undone (exit 3, keys named)."""

    def __init__(self, message: str, checks: dict[str, Any]) -> None:
        super().__init__(message)
        #: The validation or delta check that found it (keys only), for the report.
        self.checks = checks


@dataclass(frozen=True, slots=True)
class Move:
    #: The route row: a tenant id, or ``*`` (``--all``).
    key: str
    scopes: tuple[tuple[str, tuple[Table, ...]], ...]

    @property
    def label(self) -> str:
        return "every tenant" if self.key == EVERY_TENANT else f"tenant {self.key!r}"

    @property
    def tenant(self) -> str | None:
        """The tenant filter for whole-move queries (None: every tenant)."""
        return None if self.key == EVERY_TENANT else self.key


@dataclass(slots=True)
class Context:
    source: Database
    destination: Database
    state: StateStore
    destination_label: str
    batch_size: int
    #: How long a barrier waits for the fleet's acknowledgements.
    ack_timeout_s: float = 30.0
    #: How long a transaction in progress may hold the horizon back.
    horizon_timeout_s: float = 60.0
    #: Called with one line of progress (the CLI prints it).
    say: Callable[[str], None] = lambda line: None


def _put(ctx: Context, move: Move, phase: str, status: str, report: dict[str, Any]) -> None:
    for scope, _ in move.scopes:
        ctx.state.put(scope, phase, ctx.destination_label, status, report)


def start_watermark(ctx: Context, scope: str) -> int | None:
    return recorded_start(ctx.state, scope, ctx.destination_label)


def start(ctx: Context, move: Move) -> dict[str, Any]:
    """Route the move to ``tracking``, record the watermark, wait for the fleet."""
    route = get_route(ctx.source, move.key)
    if route is not None and route.state in (RouteState.FROZEN, RouteState.DESTINATION):
        raise MigrateError(f"{move.label} is already {route.state.value} to "
                           f"{route.destination}: run 'gochatd move cutover' to finish "
                           "or 'gochatd move rollback' to undo it")
    fresh = route is None or route.state is RouteState.SOURCE
    for installed in prepare_source(ctx.source):
        ctx.say(f"installed in the source: {installed}")
    for installed in prepare_tracking(ctx.destination):
        ctx.say(f"installed in the destination: {installed}")
    version = set_route(ctx.source, move.key, route_url(ctx.destination.endpoint),
                        RouteState.TRACKING)
    known = [w for w in (start_watermark(ctx, s) for s, _ in move.scopes) if w is not None]
    watermark = min(known) if known and not fresh else safe_horizon(
        ctx.source, timeout_s=ctx.horizon_timeout_s)
    report: dict[str, Any] = {"route": move.key, "watermark": watermark, "version": version}
    _put(ctx, move, START, RUNNING, report)
    ack = wait_for_fleet(ctx.source, version, ctx.ack_timeout_s)
    report["fleet"] = ack.to_dict()
    _put(ctx, move, START, DONE if ack.complete else FAILED, report)
    if not ack.complete:
        raise MigrateError(_not_acked(ack, "the dual-write barrier"))
    ctx.say(f"{move.label}: tracking from change {watermark}; {len(ack.acked)} daemon(s) "
            "acknowledged")
    return report


def adopt_new_scopes(ctx: Context, move: Move) -> None:
    """``--all``: a tenant that appeared after start inherits the move's watermark (every
    row it has was written after it, so catch-up carries it)."""
    marks = [w for w in (start_watermark(ctx, s) for s, _ in move.scopes) if w is not None]
    if not marks:
        raise MigrateError(f"{move.label}: no move started: run 'gochatd move start' "
                           "first")
    for scope, _ in move.scopes:
        if start_watermark(ctx, scope) is None:
            ctx.state.put(scope, START, ctx.destination_label, DONE,
                          {"route": move.key, "watermark": min(marks), "adopted": True})


def validate_move(ctx: Context, move: Move) -> dict[str, dict[str, Any]]:
    """Each scope's live validation (validate.py), recorded in the StateStore."""
    return {scope: validate_scope(ctx.source, ctx.destination, scope=scope, tables=tables,
                                  state=ctx.state, destination_label=ctx.destination_label,
                                  batch_size=ctx.batch_size)
            for scope, tables in move.scopes}


def _first_difference(checks: dict[str, dict[str, Any]]) -> tuple[str, str, list[Any]] | None:
    """(scope, table, first differing keys) of a validation or delta check, if any."""
    for scope, check in checks.items():
        for name, entry in check.get("tables", {}).items():
            if not entry["equal"]:
                named = entry.get("first_differing_keys", {})  # validate: {key column: keys}
                keys: list[Any] = entry.get("different") or next(iter(named.values()), [])
                return scope, str(name), list(keys)
    return None


def _recorded_watermarks(ctx: Context, move: Move) -> dict[str, int] | None:
    marks: dict[str, int] = {}
    for scope, _ in move.scopes:
        done = ctx.state.get(scope, VALIDATE, ctx.destination_label)
        if done is None or done.status != DONE or "watermark" not in done.report:
            return None
        marks[scope] = int(done.report["watermark"])
    return marks


def cutover(ctx: Context, move: Move, *, window_s: float,
            validated: dict[str, dict[str, Any]] | None = None) -> dict[str, Any]:
    """``validated``: this move's validation just done by the caller (``run``)."""
    route = get_route(ctx.source, move.key)
    if route is None or route.state in (RouteState.SOURCE,):
        raise MigrateError(f"{move.label}: no move in progress: run 'gochatd move "
                           "start' first")
    if route.state is RouteState.DESTINATION:
        return _already_cut_over(ctx, move, route.version)
    since = _delta_since(ctx, move, route.state, validated)
    url = route_url(ctx.destination.endpoint)
    prepare_source(ctx.source)  # a start from before they existed
    prepare_tracking(ctx.destination)
    frozen_at = time.monotonic()
    report = _freeze_and_check(ctx, move, url, since)
    return _switch_to_destination(ctx, move, url, report, window_s=window_s,
                                  frozen_at=frozen_at)


def _already_cut_over(ctx: Context, move: Move, version: int) -> dict[str, Any]:
    """A re-run after the route reached ``destination``: the recorded report."""
    ctx.say(f"{move.label}: already cut over")
    previous = ctx.state.get(move.scopes[0][0], CUTOVER, ctx.destination_label)
    if previous is None:
        return {"route": move.key}
    if previous.status == RUNNING:  # it stopped in its last barrier: finish that
        previous.report["fleet_destination"] = wait_for_fleet(
            ctx.source, version, ctx.ack_timeout_s).to_dict()
        _put(ctx, move, CUTOVER, DONE, previous.report)
    return previous.report


def _delta_since(ctx: Context, move: Move, state: RouteState,
                 validated: dict[str, dict[str, Any]] | None) -> dict[str, int]:
    """Each scope's watermark of its last validation: the frozen window's delta check only
    looks at what changed after it."""
    if state is RouteState.TRACKING:
        # Validate first, while writes still flow: the frozen window then only has to
        # check what changed since (the delta check), however big the tenant is.
        checks = validated if validated is not None else validate_move(ctx, move)
        found = _first_difference(checks)
        if found is not None:
            scope, name, keys = found
            raise CutoverBlocked(f"{move.label}: cutover blocked: {_scope_label(scope)} {name} "
                                 f"differs at keys {keys}; the route stays tracking", checks)
        return {scope: int(check["watermark"]) for scope, check in checks.items()}
    # resuming a cutover that stopped while frozen
    recorded = _recorded_watermarks(ctx, move)
    return recorded if recorded is not None else {
        scope: int(check["watermark"]) for scope, check in validate_move(ctx, move).items()}


def _freeze_and_check(ctx: Context, move: Move, url: str,
                      since: dict[str, int]) -> dict[str, Any]:
    """Freeze the route, wait for the fleet, catch up a last time and check every row changed
    since ``since``; a difference puts the route back to tracking (``CutoverBlocked``)."""
    version = set_route(ctx.source, move.key, url, RouteState.FROZEN)
    report: dict[str, Any] = {"route": move.key, "frozen_version": version}
    _put(ctx, move, CUTOVER, RUNNING, report)
    ctx.say(f"{move.label}: frozen; waiting for the fleet")
    report["fleet_frozen"] = wait_for_fleet(ctx.source, version, ctx.ack_timeout_s).to_dict()
    final: dict[str, Any] = {}
    deltas: dict[str, Any] = {}
    for scope, tables in move.scopes:
        final[scope] = catch_up_scope(
            ctx.source, ctx.destination, scope=scope, tables=tables, state=ctx.state,
            destination_label=ctx.destination_label, batch_size=ctx.batch_size)
        deltas[scope] = delta_check(ctx.source, ctx.destination, scope=scope, tables=tables,
                                    since=since[scope])
    report["final_catch_up"] = {s: _brief(r) for s, r in final.items()}
    report["delta_check"] = deltas
    found = _first_difference(deltas)
    if found is not None:
        set_route(ctx.source, move.key, url, RouteState.TRACKING)  # writes flow again
        _put(ctx, move, CUTOVER, FAILED, report)
        scope, name, keys = found
        raise CutoverBlocked(
            f"{move.label}: cutover blocked: {_scope_label(scope)} {name} differs at keys "
            f"{keys}; the route is back to tracking", deltas)
    return report


def _switch_to_destination(ctx: Context, move: Move, url: str, report: dict[str, Any], *,
                           window_s: float, frozen_at: float) -> dict[str, Any]:
    """Record the destination's watermark, route to it with the source's read-only window,
    and wait for the fleet."""
    report["destination_watermark"] = safe_horizon(ctx.destination,
                                                   timeout_s=ctx.horizon_timeout_s)
    if move.key != EVERY_TENANT:
        floors = separate_ids(ctx.source, ctx.destination, TENANT_TABLES)
        report["destination_job_ids_from"] = floors["background_jobs"]
        report["destination_ids_from"] = floors
    # Recorded before the route changes: rollback needs the destination's watermark even if
    # this process dies in the barrier below.
    _put(ctx, move, CUTOVER, RUNNING, report)
    version = set_route(ctx.source, move.key, url, RouteState.DESTINATION, window_s=window_s)
    report["frozen_s"] = round(time.monotonic() - frozen_at, 3)
    report["destination_version"] = version
    report["readonly_window_s"] = window_s
    ack = wait_for_fleet(ctx.source, version, ctx.ack_timeout_s)
    report["fleet_destination"] = ack.to_dict()
    _put(ctx, move, CUTOVER, DONE, report)
    ctx.say(f"{move.label}: cut over to the destination after {report['frozen_s']} s frozen; "
            f"{len(ack.acked)} daemon(s) acknowledged")
    if not ack.complete:
        ctx.say(_not_acked(ack, "the cutover") + " (they will follow on their next refresh; "
                "the source refuses their writes meanwhile)")
    return report


def not_cut_over(source: Database, move: Move) -> str:
    """Why a move has nothing to roll back: it was not cut over, or (one tenant named) the
    move that was cut over is the one of every tenant (``--all``)."""
    if move.key != EVERY_TENANT:
        whole = get_route(source, EVERY_TENANT)
        if whole is not None and whole.state in (RouteState.DESTINATION, RouteState.FROZEN):
            return ("every tenant was moved together (--all), not this tenant alone; "
                    "roll back with --all")
    return "it was not cut over"


def rollback(ctx: Context, move: Move) -> dict[str, Any]:
    route = get_route(ctx.source, move.key)
    previous = ctx.state.get(move.scopes[0][0], ROLLBACK, ctx.destination_label)
    if (route is not None and route.state is RouteState.SOURCE and previous is not None
            and previous.status == RUNNING):  # it stopped in its barrier: finish that
        previous.report["fleet"] = wait_for_fleet(ctx.source, route.version,
                                                  ctx.ack_timeout_s).to_dict()
        _put(ctx, move, ROLLBACK, DONE, previous.report)
        ctx.say(f"{move.label}: rolled back; the source is the writer again")
        return previous.report
    if route is None or route.state in (RouteState.SOURCE, RouteState.TRACKING):
        raise MigrateError(f"{move.label}: nothing to roll back: {not_cut_over(ctx.source, move)}")
    url = route.destination
    report: dict[str, Any] = {"route": move.key, "from_state": route.state.value}
    if route.state is RouteState.DESTINATION:
        if route.window_over:
            raise MigrateError(f"{move.label}: rollback refused: the source's read-only window "
                               f"ended at {route.readonly_until}")
        since = cutover_watermark(ctx.state, move, ctx.destination_label)
        if since is None:
            raise MigrateError(f"{move.label}: rollback refused: no cutover record to check "
                               "the destination against")
        writes = destination_writes_after(ctx.destination, move.tenant, since)
        report["destination_writes"] = writes
        if writes:
            raise MigrateError(
                f"{move.label}: rollback refused: the destination has {writes} write(s) of "
                "its own since the cutover, which the source does not have; rolling back "
                "would lose them")
        checks = validate_move(ctx, move)
        report["validate"] = checks
        found = _first_difference(checks)
        if found is not None:
            raise CutoverBlocked(f"{move.label}: rollback refused: {_scope_label(found[0])} "
                                 f"{found[1]} differs between source and destination", checks)
    _put(ctx, move, ROLLBACK, RUNNING, report)  # so that a re-run finishes the barrier
    version = set_route(ctx.source, move.key, url, RouteState.SOURCE)
    ack = wait_for_fleet(ctx.source, version, ctx.ack_timeout_s)
    report["fleet"] = ack.to_dict()
    _put(ctx, move, ROLLBACK, DONE, report)
    ctx.say(f"{move.label}: rolled back; the source is the writer again")
    return report


def cutover_watermark(state: StateStore, move: Move, destination_label: str) -> int | None:
    """The destination's own change counter as the move's cutover recorded it: a row or
    tombstone numbered above it is a write the source never saw."""
    marks = []
    for scope, _ in move.scopes:
        done = state.get(scope, CUTOVER, destination_label)
        if done is not None and "destination_watermark" in done.report:
            marks.append(int(done.report["destination_watermark"]))
    return min(marks) if marks else None


def _brief(report: dict[str, Any]) -> dict[str, Any]:
    return {k: report[k] for k in ("rows", "deletes", "rounds", "applied") if k in report}


def _not_acked(ack: FleetAck, what: str) -> str:
    names = ", ".join(ack.waiting[:5])
    return (f"{len(ack.waiting)} live daemon(s) did not acknowledge {what} within "
            f"{ack.seconds:.0f} s: {names}")


def _scope_label(scope: str) -> str:
    return "the fleet-wide tables" if scope == GLOBAL_SCOPE else f"tenant {scope!r}"


__all__: Sequence[str] = ["Context", "CutoverBlocked", "Move", "adopt_new_scopes", "cutover",
                          "cutover_watermark", "rollback", "start", "validate_move"]
