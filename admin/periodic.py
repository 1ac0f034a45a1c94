"""``GET /v1/periodic``: the periodic jobs this daemon knows (config and decorators), each
with its schedule, its last slot (fleet-wide, from ``gochatd_periodic_slots``) and its next
runs by the database clock: what ``gochatd periodic list`` prints, as JSON."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from quart import Response, jsonify, request
from quart_trio import QuartTrio

from gochatd.admin.http import ApiError
from gochatd.periodic_jobs.listing import store_listing
from gochatd.periodic_jobs.specs import effective_specs

if TYPE_CHECKING:
    from gochatd.worker.control import Control

#: Next runs listed per periodic job: ``?count=`` 1..MAX_COUNT, DEFAULT_COUNT when absent.
DEFAULT_COUNT = 3
MAX_COUNT = 20


def register(app: QuartTrio, daemon: Control) -> None:
    @app.get("/v1/periodic")
    async def periodic() -> Response:
        count = _count_arg(request.args.get("count"))
        specs = effective_specs(daemon.settings.periodic)
        listing = await store_listing(daemon.store, specs, count)
        return jsonify(listing.to_dict())


def _count_arg(raw: str | None) -> int:
    if raw is None:
        return DEFAULT_COUNT
    if not raw.isascii() or not raw.isdigit() or len(raw) > 2 or not 1 <= int(raw) <= MAX_COUNT:
        raise ApiError(400, "bad_request", f"count must be an integer in 1..{MAX_COUNT}")
    return int(raw)


def periodic_path(get: Any, json: Any, ref: Any) -> dict[str, Any]:
    """Built with openapi.py's own helpers (passed in), like the outbox's part."""
    count = {"name": "count", "in": "query", "description": "next runs listed per job",
             "schema": {"type": "integer", "minimum": 1, "maximum": MAX_COUNT}}
    return {"/v1/periodic": get("Periodic jobs: schedules, last slot and next runs",
                                json(ref("PeriodicList"), "periodic jobs"), [count])}


def periodic_schemas() -> dict[str, Any]:
    time = {"type": "string", "format": "date-time"}
    item = {"type": "object", "required": [
        "job_type", "schedule", "queue", "tenant_id", "catch_up", "source", "last_slot",
        "next_runs"], "properties": {
        "job_type": {"type": "string"}, "schedule": {"type": "string"},
        "queue": {"type": "string"}, "tenant_id": {"type": "string"},
        "catch_up": {"enum": ["skip", "latest"]}, "source": {"enum": ["decorator", "config"]},
        "last_slot": {"type": ["string", "null"], "format": "date-time"},
        "next_runs": {"type": "array", "items": time}}}
    return {"PeriodicList": {"type": "object", "required": ["clock", "now", "periodic"],
                             "properties": {"clock": {"enum": ["database", "local"]},
                                            "now": time,
                                            "periodic": {"type": "array", "items": item}}}}
