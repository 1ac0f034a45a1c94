"""The OpenAPI 3 document of the admin API, served at /v1/openapi.json."""

from __future__ import annotations

from typing import Any

import gochatd
from gochatd.admin.fleet_openapi import fleet_paths, fleet_schemas
from gochatd.admin.periodic import periodic_path, periodic_schemas
from gochatd.admin.workflows import workflow_paths, workflow_schemas
from gochatd.gateway.openapi import gateway_paths, gateway_schemas, tenants_path
from gochatd.model import MAX_ID, AttemptOutcome, JobStatus
from gochatd.outbox.openapi import outbox_paths, outbox_schemas
from gochatd.store.attempts import ATTEMPTS_KEPT_PER_JOB

_NULLABLE_STR = {"type": ["string", "null"]}
_NULLABLE_TIME = {"type": ["string", "null"], "format": "date-time"}


def _nullable(schema: dict[str, Any]) -> dict[str, Any]:
    """In a JSON body, null is the same as leaving the field out."""
    return {**schema, "type": [schema["type"], "null"]}


def _ref(name: str) -> dict[str, str]:
    return {"$ref": f"#/components/schemas/{name}"}


def _json(schema: dict[str, Any], description: str) -> dict[str, Any]:
    return {"description": description, "content": {"application/json": {"schema": schema}}}


_ERRORS = {
    "400": _json(_ref("Error"), "bad request"),
    "401": _json(_ref("Error"), "missing or wrong bearer token"),
    "403": _json(_ref("Error"), "cross-origin request refused"),
    "404": _json(_ref("Error"), "not found"),
    "405": _json(_ref("Error"), "method not allowed"),
    "409": _json(_ref("Error"), "not allowed in the current state"),
    "413": _json(_ref("Error"), "body too large"),
    "503": _json(_ref("Error"), "the database is unreachable"),
}

_JOB_ID = {"name": "job_id", "in": "path", "required": True,
           "schema": {"type": "integer", "minimum": 1, "maximum": MAX_ID}}
_WAIT_S = {"name": "wait_s", "in": "query", "required": False,
           "description": "hold the request until the job is final, at most this long",
           "schema": {"type": "number", "minimum": 0, "maximum": 60}}
_QUEUE = {"name": "queue", "in": "path", "required": True,
          "schema": {"type": "string", "pattern": "^[A-Za-z0-9_-]{1,64}$"}}
#: Filters: an empty value is the same as leaving the filter out.
_QUEUE_FILTER = {"type": "string", "pattern": "^[A-Za-z0-9_-]{0,64}$"}
_TEXT_FILTER = {"type": "string", "maxLength": 200}


def _get(summary: str, ok: dict[str, Any], params: list[dict[str, Any]] | None = None,
         extra: dict[str, Any] | None = None, *, open_: bool = False) -> dict[str, Any]:
    # With a token, reads need it too; ``open_``: the probes, served to anyone.
    op: dict[str, Any] = {"summary": summary,
                          "responses": {"200": ok, **_ERRORS, **(extra or {})}}
    if open_:
        op["security"] = []
    if params:
        op["parameters"] = params
    return {"get": op}


def _page(summary: str, media_type: str, description: str, *, open_: bool = False
          ) -> dict[str, Any]:
    op: dict[str, Any] = {"summary": summary, "responses": {
        "200": {"description": description, "content": {media_type: {"schema": {"type": "string"}}}},
        "401": _ERRORS["401"], "403": _ERRORS["403"], "405": _ERRORS["405"]}}
    if open_:
        op["security"] = []
        del op["responses"]["401"]
    return {"get": op}


def _post(summary: str, ok: dict[str, Any], params: list[dict[str, Any]] | None = None,
          body: dict[str, Any] | None = None, *, body_required: bool = False) -> dict[str, Any]:
    op: dict[str, Any] = {"summary": summary, "responses": {"200": ok, **_ERRORS}}
    if params:
        op["parameters"] = params
    if body:
        op["requestBody"] = {"required": body_required,
                             "content": {"application/json": {"schema": body}}}
    return {"post": op}


def _delete(summary: str, ok: dict[str, Any], params: list[dict[str, Any]]) -> dict[str, Any]:
    return {"delete": {"summary": summary, "parameters": params,
                       "responses": {"200": ok, **_ERRORS}}}


def _control_paths(statuses: list[str]) -> dict[str, Any]:
    """The job controls (admin/controls.py; docs/operations.md, "Job controls")."""
    bulk_body = {"type": "object", "additionalProperties": False, "required": ["action"],
                 "properties": {
                     "action": {"enum": ["retry", "cancel", "delete", "discard", "run_now"]},
                     "ids": {"type": ["array", "null"], "minItems": 1, "maxItems": 10000,
                             "items": {"type": "integer", "minimum": 1, "maximum": MAX_ID}},
                     "status": {"enum": [*statuses, "", None]},
                     "queue": _nullable(_QUEUE_FILTER), "job_type": _nullable(_TEXT_FILTER),
                     "tenant_id": _nullable(_TEXT_FILTER)},
                 # ids, or at least one filter (an empty value is no filter).
                 "anyOf": [{"required": [name], "properties": {name: schema}} for name, schema in (
                     ("ids", {"type": "array"}), ("status", {"enum": statuses}),
                     ("queue", {"type": "string", "minLength": 1}),
                     ("job_type", {"type": "string", "minLength": 1}),
                     ("tenant_id", {"type": "string", "minLength": 1}))]}
    return {
        "/v1/jobs/bulk": _post(
            "One control over the jobs of ids and/or filters (at least one), in batches",
            _json(_ref("BulkControl"), "how many jobs matched and changed"), body=bulk_body,
            body_required=True),
        "/v1/jobs/{job_id}/run-now": _post(
            "Make a queued or retrying job that is not yet due due now",
            _json(_ref("Job"), "due now"), [_JOB_ID]),
        "/v1/jobs/{job_id}/discard": _post(
            "Make a queued or retrying job dead without running it",
            _json(_ref("Job"), "dead, error_class discarded"), [_JOB_ID]),
    }


_CONTROL_SCHEMAS = {
    "BulkControl": {"type": "object", "required": ["action", "matched", "changed"],
                    "properties": {"action": {"type": "string"}, "matched": {"type": "integer"},
                                   "changed": {"type": "integer"}}},
    "Deleted": {"type": "object", "required": ["id", "deleted"],
                "properties": {"id": {"type": "integer"}, "deleted": {"const": True}}},
}


def openapi_document(*, auth_required: bool = True, gateway: bool = False) -> dict[str, Any]:
    """The document as this server behaves: with an admin token every operation needs the
    bearer token but the probes and the dashboard's page; without one (loopback only) no
    operation does. With ``gateway`` (served on this
    listener) POST /v1/jobs and /v1/jobs:batch need a tenant API key instead."""
    gateway_ops = gateway_paths(_json, _ref, _ERRORS) if gateway else {}
    statuses = [s.value for s in JobStatus]
    list_params = [
        {"name": "status", "in": "query", "schema": {"type": "string", "enum": [*statuses, ""]}},
        {"name": "queue", "in": "query", "schema": _QUEUE_FILTER},
        {"name": "tenant", "in": "query", "schema": _TEXT_FILTER},
        {"name": "job_type", "in": "query", "schema": _TEXT_FILTER},
        {"name": "limit", "in": "query", "schema": {"type": "integer", "minimum": 1,
                                                    "maximum": 500}},
        {"name": "cursor", "in": "query", "description": "next_cursor of the previous page",
         "schema": {"type": "string", "pattern": "^[0-9]{0,19}$"}},
        {"name": "order", "in": "query", "schema": {"enum": ["newest", "oldest", ""]}},
        {"name": "q", "in": "query", "description": "an id, or text in the job type, the "
         "tenant or the payload", "schema": _TEXT_FILTER},
        {"name": "scheduled", "in": "query", "description": "only jobs not yet due, soonest "
         "first", "schema": {"type": "string", "enum": ["true", "false", "1", "0", ""]}},
    ]
    return {
        "openapi": "3.1.0",
        "info": {"title": "gochatd admin API", "version": gochatd.__version__},
        "security": [{"bearer": []}] if auth_required else [],
        "paths": {
            "/healthz": _get("Liveness", _json(_ref("Health"), "the event loop answers"),
                             open_=True),
            "/readyz": _get("Readiness", _json(_ref("Ready"), "ready"),
                            extra={"503": _json(_ref("Ready"), "not ready")}, open_=True),
            "/": _page("The dashboard (static: it asks for the token and sends it with each "
                       "API call)", "text/html", "the dashboard page", open_=True),
            "/v1/auth": _get("Whether the admin API needs the bearer token (served without it)",
                             _json(_ref("Auth"), "whether a token is required"), open_=True),
            "/metrics": _page("Prometheus metrics", "text/plain", "Prometheus text format"),
            "/v1/openapi.json": _get("This document",
                                     _json({"type": "object"}, "the OpenAPI 3.1 document")),
            "/v1/status": _get("This worker's status", _json(_ref("Status"), "status")),
            "/v1/drain": _post(
                "Stop claiming; in-flight jobs finish", _json(_ref("Status"), "draining"),
                [{"name": "exit", "in": "query",
                  "schema": {"type": "string", "enum": ["true", "false", "1", "0"]}}],
            ),
            "/v1/pause": _post("Stop claiming in this process", _json(_ref("Status"), "paused")),
            "/v1/resume": _post("Resume claiming (undo drain and pause)",
                                _json(_ref("Status"), "resumed")),
            "/v1/reload": _post("Reload the configuration", _json(_ref("Reload"), "reloaded")),
            "/v1/queues": _get("Queues with depth and pause state", _json(_ref("QueueList"), "queues")),
            "/v1/job-types": _get("The defaults daemons published for their job types, and "
                                  "the waiting jobs no live daemon can run",
                                  _json(_ref("JobTypeList"), "job types, by name")),
            "/v1/queues/{queue}/pause": _post("Pause a queue fleet-wide",
                                              _json(_ref("QueuePause"), "paused"), [_QUEUE]),
            "/v1/queues/{queue}/resume": _post("Resume a queue fleet-wide",
                                               _json(_ref("QueuePause"), "resumed"), [_QUEUE]),
            # GET lists jobs (admin); POST is the gateway's (popped here, before **gateway_ops).
            "/v1/jobs": {**_get("List jobs", _json(_ref("JobList"), "jobs"), list_params),
                         **gateway_ops.pop("/v1/jobs", {})},
            **gateway_ops,
            **tenants_path(_get, _json, _ref),
            **periodic_path(_get, _json, _ref),
            **workflow_paths(_get, _json, _ref),
            "/v1/jobs/retry": _post(
                "Retry dead jobs matching a filter", _json(_ref("BulkRetry"), "retried"),
                body={"type": "object", "additionalProperties": False, "properties": {
                    "queue": _nullable(_QUEUE_FILTER), "tenant": _nullable(_TEXT_FILTER),
                    "job_type": _nullable(_TEXT_FILTER),
                    "limit": {"type": ["integer", "null"], "minimum": 1, "maximum": 10000}}},
            ),
            "/v1/jobs/{job_id}": {
                **_get("One job, with its result, recorded attempts and dependencies; wait_s "
                       "long-polls until it is final (a tenant key: its own job, without "
                       "attempts and dependencies)",
                       _json({"anyOf": [_ref("JobDetail"), _ref("Job")]},
                             "the job: JobDetail for an operator, Job for a tenant key"),
                       [_JOB_ID, _WAIT_S]),
                **_delete("Delete a job in any status but running (409: cancel it first)",
                          _json(_ref("Deleted"), "deleted"), [_JOB_ID])},
            **_control_paths(statuses),
            "/v1/jobs/{job_id}/retry": _post("Retry a dead or cancelled job",
                                             _json(_ref("Job"), "queued again"), [_JOB_ID]),
            "/v1/jobs/{job_id}/cancel": _post("Cancel a job (running: via its heartbeat)",
                                              _json(_ref("Job"), "cancelled"), [_JOB_ID]),
            **outbox_paths(_get, _post, _json, _ref, _TEXT_FILTER),
            **fleet_paths(_get, _json, _ref, _ERRORS),
        },
        "components": {
            "securitySchemes": {"bearer": {"type": "http", "scheme": "bearer"},
                                "tenantKey": {"type": "http", "scheme": "bearer",
                                              "description": "a tenant API key (gateway.keys)"}},
            "schemas": {
                **outbox_schemas(_ref),
                **fleet_schemas(_ref),
                **periodic_schemas(),
                **workflow_schemas(statuses),
                **gateway_schemas(_ref),
                **_CONTROL_SCHEMAS,
                "Error": {"type": "object", "required": ["error"], "properties": {"error": {
                    "type": "object", "required": ["code", "message"],
                    "properties": {"code": {"type": "string"}, "message": {"type": "string"}}}}},
                "Auth": {"type": "object", "required": ["token_required"],
                         "properties": {"token_required": {"type": "boolean"}},
                         "additionalProperties": False},
                "Health": {"type": "object", "required": ["status"],
                           "properties": {"status": {"const": "ok"}}},
                "Ready": {"type": "object", "required": ["status", "store", "dispatch", "draining"],
                          "properties": {
                              "status": {"enum": ["ready", "not_ready"]},
                              "store": {"enum": ["ok", "down", "failing"]},
                              "store_error": {"type": "string"},
                              "dispatch": {"enum": ["streams", "polling", "down"]},
                              "draining": {"type": "boolean"},
                              "degraded": _NULLABLE_STR}},
                "Status": {"type": "object", "required": [
                    "worker_id", "version", "mode", "concurrency", "in_flight", "draining",
                    "paused", "paused_queues", "uptime_s", "config_reloaded_at",
                    "pending_restart"], "properties": {
                    "worker_id": {"type": "string"}, "version": {"type": "string"},
                    "mode": {"enum": ["starting", "streams", "polling", "stopped"]},
                    "degraded": _NULLABLE_STR,
                    "concurrency": {"type": "integer"}, "in_flight": {"type": "integer"},
                    "draining": {"type": "boolean"}, "drained": {"type": "boolean"},
                    "exit_when_drained": {"type": "boolean"}, "paused": {"type": "boolean"},
                    "stopping": {"type": "boolean"},
                    "paused_queues": {"type": "array", "items": {"type": "string"}},
                    "queues": {"type": "object", "additionalProperties": {"type": "integer"}},
                    "started_at": {"type": "string", "format": "date-time"},
                    "uptime_s": {"type": "number"},
                    "config_reloaded_at": _NULLABLE_TIME,
                    "pending_restart": {"type": "array", "items": {"type": "string"}},
                    "counters": {"type": "object", "additionalProperties": {"type": "integer"}},
                    "handoffs": {"type": "object", "additionalProperties": {"type": "integer"},
                                 "description": "units handed to each connection-thread "
                                                "pool since start (thread hops)"},
                    "admin_address": _NULLABLE_STR,
                    "gateway_address": _NULLABLE_STR}},
                "Reload": {"type": "object", "required": ["applied", "needs_restart"],
                           "properties": {
                               "applied": {"type": "array", "items": {"type": "string"}},
                               "needs_restart": {"type": "array", "items": {"type": "string"}},
                               "reloaded_at": _NULLABLE_TIME}},
                "Queue": {"type": "object", "required": [
                    "queue", "queued", "delayed", "running", "retrying", "dead", "paused",
                    "weight"], "properties": {
                    "queue": {"type": "string"}, "queued": {"type": "integer"},
                    "delayed": {"type": "integer"}, "running": {"type": "integer"},
                    "retrying": {"type": "integer"}, "dead": {"type": "integer"},
                    "oldest_due_age_s": {"type": ["number", "null"]},
                    "paused": {"type": "boolean"}, "weight": {"type": "integer"},
                    "max_running": {"type": ["integer", "null"]},
                    "rate": {"type": ["string", "null"],
                             "description": "worker.queue_rates, as written (10/s)"}}},
                "JobType": {"type": "object", "required": [
                    "job_type", "queue", "max_attempts", "timeout_s", "updated_at",
                    "published_by"], "properties": {
                    "job_type": {"type": "string"}, "queue": {"type": "string"},
                    "max_attempts": {"type": "integer"}, "timeout_s": {"type": ["number", "null"]},
                    "updated_at": {"type": "string", "format": "date-time"},
                    "published_by": {"type": "string"}}},
                "JobTypeList": {"type": "object", "required": ["job_types", "without_handler"],
                                "properties": {
                    "job_types": {"type": "array", "items": _ref("JobType")},
                    "without_handler": {"type": "array", "items": _ref("WaitingWithoutHandler")}}},
                "WaitingWithoutHandler": {"type": "object", "required": [
                    "job_type", "queue", "waiting", "oldest_age_s"], "properties": {
                    "job_type": {"type": "string"}, "queue": {"type": "string"},
                    "waiting": {"type": "integer"}, "oldest_age_s": {"type": "number"}}},
                "QueueList": {"type": "object", "required": ["queues"], "properties": {
                    "queues": {"type": "array", "items": _ref("Queue")}}},
                "QueuePause": {"type": "object", "required": ["queue", "paused", "changed"],
                               "properties": {"queue": {"type": "string"},
                                              "paused": {"type": "boolean"},
                                              "changed": {"type": "boolean"}}},
                "Job": {"type": "object", "required": [
                    "id", "tenant_id", "job_type", "queue", "status", "attempts",
                    "max_attempts", "fence"], "properties": {
                    "id": {"type": "integer"}, "tenant_id": {"type": "string"},
                    "job_type": {"type": "string"}, "queue": {"type": "string"},
                    "payload": {"type": "object"}, "status": {"enum": statuses},
                    "priority": {"type": "integer"}, "attempts": {"type": "integer"},
                    "max_attempts": {"type": "integer"}, "fence": {"type": "integer"},
                    "scheduled_at": {"type": "string"}, "created_at": {"type": "string"},
                    "updated_at": {"type": "string"}, "idempotency_key": _NULLABLE_STR,
                    "locked_by": _NULLABLE_STR, "locked_at": _NULLABLE_STR,
                    "lease_expires_at": _NULLABLE_STR, "last_error": _NULLABLE_STR,
                    "error_class": _NULLABLE_STR, "failed_at": _NULLABLE_STR,
                    "completed_at": _NULLABLE_STR, "dispatched_at": _NULLABLE_STR,
                    "traceparent": _NULLABLE_STR, "cancel_requested": {"type": "boolean"},
                    "result": {"description": "what the handler returned (any JSON; null: none, "
                                              "or not completed; left out of listings)"}}},
                "JobAttempt": {"type": "object", "required": [
                    "attempt", "started_at", "finished_at", "worker", "outcome", "error_class",
                    "error"], "properties": {
                    "attempt": {"type": "integer"}, "started_at": _NULLABLE_STR,
                    "finished_at": _NULLABLE_STR, "worker": _NULLABLE_STR,
                    "outcome": {"enum": [o.value for o in AttemptOutcome]},
                    "error_class": _NULLABLE_STR, "error": _NULLABLE_STR}},
                "JobDetail": {"allOf": [_ref("Job"), _ref("JobLinks"), {
                    "type": "object", "required": ["attempt_history"], "properties": {
                        "attempt_history": {"type": "array", "items": _ref("JobAttempt"),
                                            "description": "the job's runs, newest first, at "
                                                           f"most {ATTEMPTS_KEPT_PER_JOB}"}}}]},
                "JobList": {"type": "object", "required": ["jobs", "next_cursor"], "properties": {
                    "jobs": {"type": "array", "items": _ref("Job")},
                    "next_cursor": _NULLABLE_STR}},
                "BulkRetry": {"type": "object", "required": ["retried", "ids"], "properties": {
                    "retried": {"type": "integer"},
                    "ids": {"type": "array", "items": {"type": "integer"}}}},
            },
        },
    }
