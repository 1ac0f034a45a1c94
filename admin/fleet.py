"""The fleet dashboard's reads and requests (docs/operations.md, "The fleet" and
"Throughput charts"): ``GET /v1/stats/throughput``, ``GET /v1/fleet``,
``POST /v1/fleet/<id>/drain|pause|resume`` and ``GET /v1/jobs/counts``."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from functools import partial
from typing import TYPE_CHECKING, Any

import trio
from quart import Response, jsonify, request
from quart_trio import QuartTrio

from gochatd.admin.http import ApiError, int_arg, read_body, storable, text_arg
from gochatd.loops.fleet import ALIVE_S
from gochatd.model import JobStatus
from gochatd.store import JobStore
from gochatd.store.fleet import DAEMON_ACTIONS, DaemonRow, MinuteCounts

if TYPE_CHECKING:
    from gochatd.worker.control import Control

#: The longest chart: one day of minutes.
MAX_MINUTES = 1440
_BY = ("queue", "job_type")
#: GET /v1/jobs/counts: counting a table of a million jobs is a scan (hundreds of ms; no
#: index makes count(*) over 900k finished rows cheap). Once a count took longer than
#: SLOW_COUNT_S, the answer is a snapshot reused for up to SNAPSHOT_S; a fast count (a
#: small table) is redone on every request.
SLOW_COUNT_S = 0.05
SNAPSHOT_S = 5.0


class CountsSnapshot:
    """The last exact counts (one consistent pair of queries), and when and how fast they
    were taken. One refresh at a time: concurrent requests wait for it."""

    def __init__(self) -> None:
        self._value: dict[str, int] | None = None
        self._taken_at = self._took_s = 0.0
        self._lock = trio.Lock()

    async def get(self, store: JobStore) -> dict[str, int]:
        async with self._lock:
            now = trio.current_time()
            if (self._value is None or self._took_s < SLOW_COUNT_S
                    or now - self._taken_at > SNAPSHOT_S):
                counts = await store.count_jobs_by_status()
                value = {status.value: counts.get(status, 0) for status in JobStatus}
                value["scheduled"] = await store.count_scheduled_jobs()
                value["delayed"] = await store.count_delayed_jobs()
                self._value, self._taken_at = value, now
                self._took_s = trio.current_time() - now
            return dict(self._value)


def _iso_minute(moment: datetime) -> str:
    return moment.astimezone(UTC).strftime("%Y-%m-%dT%H:%M:00Z")


def throughput_series(now: datetime, minutes: int, rows: list[MinuteCounts],
                      by: str | None) -> list[dict[str, Any]]:
    """One series per key (``all`` without ``by``), each with one point per minute of the
    last ``minutes`` up to ``now``'s, oldest first, minutes without a row as zeros."""
    last = now.astimezone(UTC).replace(second=0, microsecond=0)
    axis = [_iso_minute(last - timedelta(minutes=minutes - 1 - i)) for i in range(minutes)]
    found: dict[str, dict[str, tuple[int, int, int]]] = {}
    for row in rows:
        found.setdefault(row.key, {})[_iso_minute(row.minute)] = (
            row.completed, row.failed, row.retried)
    keys = sorted(found) or (["all"] if by is None else [])
    series = []
    for key in keys:
        points = found.get(key, {})
        series.append({"key": key, "points": [
            {"minute": m, "completed": points.get(m, (0, 0, 0))[0],
             "failed": points.get(m, (0, 0, 0))[1], "retried": points.get(m, (0, 0, 0))[2]}
            for m in axis]})
    return series


def daemon_json(row: DaemonRow, this_id: str) -> dict[str, Any]:
    beat = row.beat
    return {
        "id": beat.id, "host": beat.host, "pid": beat.pid, "mode": beat.mode,
        "version": beat.version, "concurrency": beat.concurrency, "in_flight": beat.in_flight,
        "started_at": row.started_at.isoformat(), "last_heartbeat": row.last_heartbeat.isoformat(),
        "alive": row.heartbeat_age_s <= ALIVE_S, "this": beat.id == this_id,
        "paused": beat.paused, "draining": beat.draining, "requested": row.requested,
    }


def register(app: QuartTrio, daemon: Control) -> None:
    @app.get("/v1/stats/throughput")
    async def throughput() -> Response:
        minutes = int_arg("minutes", request.args.get("minutes"), 60, 1, MAX_MINUTES)
        by = request.args.get("by") or None
        if by is not None and by not in _BY:
            raise ApiError(400, "bad_request", "by must be queue or job_type")
        rows = await daemon.store.job_counts(minutes, by)
        now = await daemon.store.database_now()
        return jsonify({"minutes": minutes, "by": by,
                        "series": throughput_series(now, minutes, rows, by)})

    @app.get("/v1/fleet")
    async def fleet() -> Response:
        rows = await daemon.store.list_daemons()
        return jsonify({"daemons": [daemon_json(r, daemon.worker_id) for r in rows]})

    async def request_daemon(daemon_id: str, action: str) -> Response:
        await read_body(set())
        name = text_arg("daemon id", daemon_id)
        if name is None or not storable(name) or not await daemon.store.request_daemon(
                name, action):
            raise ApiError(404, "unknown_daemon", f"no daemon with id {daemon_id!r}")
        daemon.log.info("fleet_request", daemon_id=name, action=action)
        if name == daemon.worker_id:
            await daemon.refresh_fleet()  # this very daemon: at once
        response = jsonify({"id": name, "requested": action})
        response.status_code = 202
        return response

    for action in DAEMON_ACTIONS:
        app.add_url_rule(f"/v1/fleet/<daemon_id>/{action}", f"fleet_{action}",
                         partial(request_daemon, action=action), methods=["POST"])

    snapshot = CountsSnapshot()

    @app.get("/v1/jobs/counts")
    async def job_counts() -> Response:
        return jsonify(await snapshot.get(daemon.store))
