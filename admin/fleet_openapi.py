"""The fleet dashboard's part of the admin API's OpenAPI document (admin/fleet.py)."""

from __future__ import annotations

from typing import Any

from gochatd.model import JobStatus

_DAEMON_ID: dict[str, Any] = {"name": "daemon_id", "in": "path", "required": True,
              "schema": {"type": "string", "minLength": 1, "maxLength": 200}}
_INT: dict[str, Any] = {"type": "integer"}


def fleet_paths(get: Any, json: Any, ref: Any, errors: dict[str, Any]) -> dict[str, Any]:
    """Built with openapi.py's own helpers (passed in) so both parts read the same."""
    requests: dict[str, Any] = {
        f"/v1/fleet/{{daemon_id}}/{action}": {"post": {
            "summary": f"Ask one daemon of the fleet to {action} (applied on its next "
                       "heartbeat, within seconds)",
            "parameters": [_DAEMON_ID],
            "responses": {"202": json(ref("FleetRequest"), "requested"), **dict(errors)}}}
        for action in ("drain", "pause", "resume")
    }
    return {
        "/v1/stats/throughput": get(
            "Finished jobs per minute, fleet-wide", json(ref("Throughput"), "the series"),
            [{"name": "minutes", "in": "query",
              "schema": {"type": "integer", "minimum": 1, "maximum": 1440}},
             {"name": "by", "in": "query", "schema": {"enum": ["queue", "job_type", ""]}}]),
        "/v1/fleet": get("Every daemon's heartbeat row", json(ref("Fleet"), "the daemons")),
        **requests,
        "/v1/jobs/counts": get("Jobs per status (each once), the scheduled and the delayed ones apart",
                               json(ref("JobCounts"), "the counts")),
    }


def fleet_schemas(ref: Any) -> dict[str, Any]:
    point = {"type": "object", "required": ["minute", "completed", "failed", "retried"],
             "properties": {"minute": {"type": "string", "format": "date-time"},
                            "completed": _INT, "failed": _INT, "retried": _INT}}
    counted = [s.value for s in JobStatus] + ["scheduled", "delayed"]
    daemon_fields = {
        "id": {"type": "string"}, "host": {"type": "string"}, "pid": _INT,
        "mode": {"type": "string"}, "version": {"type": "string"}, "concurrency": _INT,
        "in_flight": _INT, "started_at": {"type": "string", "format": "date-time"},
        "last_heartbeat": {"type": "string", "format": "date-time"},
        "alive": {"type": "boolean"}, "this": {"type": "boolean"},
        "paused": {"type": "boolean"}, "draining": {"type": "boolean"},
        "requested": {"enum": ["drain", "pause", "resume", None]}}
    return {
        "Throughput": {"type": "object", "required": ["minutes", "by", "series"], "properties": {
            "minutes": _INT, "by": {"enum": ["queue", "job_type", None]},
            "series": {"type": "array", "items": {
                "type": "object", "required": ["key", "points"],
                "properties": {"key": {"type": "string"},
                               "points": {"type": "array", "items": point}}}}}},
        "Daemon": {"type": "object", "required": sorted(set(daemon_fields) - {"requested"}),
                   "properties": daemon_fields},
        "Fleet": {"type": "object", "required": ["daemons"], "properties": {
            "daemons": {"type": "array", "items": ref("Daemon")}}},
        "FleetRequest": {"type": "object", "required": ["id", "requested"], "properties": {
            "id": {"type": "string"}, "requested": {"enum": ["drain", "pause", "resume"]}}},
        "JobCounts": {"type": "object", "required": counted,
                      "properties": {name: _INT for name in counted}},
    }
