"""The gateway's part of the OpenAPI document (gateway/api.py) and ``GET /v1/tenants``.

The request schemas say exactly what the gateway accepts, so a fuzzer's schema-valid
requests are accepted and its schema-violating ones refused: a payload is any JSON object
whose strings and keys hold no NUL character (the databases cannot store one)."""

from __future__ import annotations

from typing import Any

from gochatd.gateway.requests import (
    IDEMPOTENCY_KEY_PATTERN,
    MAX_BATCH,
    MAX_BATCH_MEMBERS,
    MEMBER_FIELDS,
    RFC3339_PATTERN,
    WAITING_FIELDS,
)
from gochatd.model import MAX_ID
from gochatd.workflows.model import MAX_DEPENDENCIES

_NO_NUL = "^[^\\u0000]*$"
_TENANT_KEY: list[dict[str, list[str]]] = [{"tenantKey": []}]


def _nullable(schema: dict[str, Any]) -> dict[str, Any]:
    return {**schema, "type": [schema["type"], "null"]}


def _job_properties(ref: Any) -> dict[str, Any]:
    return {
        "job_type": {"type": "string", "maxLength": 200,
                     "pattern": "^[A-Za-z0-9_.\\-]+(:[A-Za-z0-9_.\\-*]+)*$"},
        "payload": {"anyOf": [ref("Payload"), {"type": "null"}]},
        "queue": _nullable({"type": "string", "pattern": "^[A-Za-z0-9_-]{1,64}$"}),
        "delay_s": _nullable({"type": "number", "minimum": 0, "maximum": 10 * 365 * 86400}),
        "scheduled_at": _nullable({"type": "string", "format": "date-time",
                                   "pattern": RFC3339_PATTERN}),
        "max_attempts": _nullable({"type": "integer", "minimum": 1, "maximum": 1000}),
        "priority": _nullable({"type": "integer", "minimum": -1000, "maximum": 1000}),
        "traceparent": _nullable({
            "type": "string", "pattern": "^[0-9a-f]{2}-[0-9a-f]{32}-[0-9a-f]{16}-[0-9a-f]{2}$"}),
        # Unique jobs (docs/unique-jobs.md).
        "unique_for_s": _nullable({"type": "number", "minimum": 0, "maximum": 30 * 86400}),
        "unique_key": _nullable({"type": "string", "minLength": 1, "maxLength": 512,
                                 "pattern": _NO_NUL}),
    }


#: delay_s and scheduled_at exclude each other (null is the same as leaving one out).
_ONE_TIME = {"not": {"required": ["delay_s", "scheduled_at"], "properties": {
    "delay_s": {"type": "number"}, "scheduled_at": {"type": "string"}}}}
#: A job with dependencies starts when they let it: none of these (docs/workflows.md).
_NOT_WHILE_WAITING = {"delay_s": {"type": "number"}, "scheduled_at": {"type": "string"},
                      "unique_for_s": {"type": "number"}, "unique_key": {"type": "string"}}
_WAITS = {"allOf": [_ONE_TIME, *({"not": {"required": ["depends_on", name], "properties": {
    "depends_on": {"type": "array", "minItems": 1}, name: schema}}}
    for name, schema in _NOT_WHILE_WAITING.items())]}
_LINKS = {
    "depends_on": _nullable({"type": "array", "maxItems": MAX_DEPENDENCIES,
                             "items": {"type": "integer", "minimum": 1, "maximum": MAX_ID}}),
    "run_if_failed": _nullable({"type": "boolean"}),
}


def _waiting_job(ref: Any) -> dict[str, Any]:
    """A chain's link or a batch's callback: starts when its dependencies let it."""
    return {"type": "object", "additionalProperties": False, "required": ["job_type"],
            "properties": {k: v for k, v in _job_properties(ref).items() if k in WAITING_FIELDS}}


def workflow_paths(json: Any, ref: Any, common: dict[str, Any]) -> dict[str, Any]:
    """POST /v1/chains and POST /v1/batches (gateway/workflows.py)."""
    def post(summary: str, request: str, response: str) -> dict[str, Any]:
        return {"post": {
            "summary": summary, "security": _TENANT_KEY,
            "requestBody": {"required": True, "content": {"application/json": {
                "schema": ref(request)}}},
            "responses": {"201": json(ref(response), "created, in one transaction"),
                          **common}}}

    return {
        "/v1/chains": post("Enqueue jobs that run one after another, each once the one before "
                           "it completed (docs/workflows.md)", "ChainRequest", "Chain"),
        "/v1/batches": post("Enqueue a batch: jobs side by side, then on_success (all "
                            "completed) and on_complete (all finished), once",
                            "BatchWorkflowRequest", "BatchWorkflow"),
    }


def workflow_schemas(ref: Any) -> dict[str, Any]:
    jobs = {"type": "array", "items": ref("Job")}
    callback = {"anyOf": [ref("WaitingJob"), {"type": "null"}]}
    return {
        "WaitingJob": _waiting_job(ref),
        "ChainRequest": {"type": "object", "additionalProperties": False, "required": ["jobs"],
                         "properties": {"jobs": {"type": "array", "minItems": 1,
                                                 "maxItems": MAX_BATCH,
                                                 "items": ref("WaitingJob")}}},
        "BatchWorkflowRequest": {
            "type": "object", "additionalProperties": False, "required": ["jobs"],
            "properties": {
                "jobs": {"type": "array", "minItems": 1, "maxItems": MAX_BATCH_MEMBERS,
                         "items": {"type": "object", "additionalProperties": False,
                                   "required": ["job_type"], **_ONE_TIME,
                                   "properties": {k: v for k, v in _job_properties(ref).items()
                                                  if k in MEMBER_FIELDS}}},
                "on_success": callback, "on_complete": callback}},
        "Chain": {"type": "object", "required": ["jobs"], "properties": {"jobs": jobs}},
        "BatchWorkflow": {"type": "object", "required": [
            "batch_id", "jobs", "on_success", "on_complete"], "properties": {
            "batch_id": {"type": "integer"}, "jobs": jobs,
            "on_success": {"anyOf": [ref("Job"), {"type": "null"}]},
            "on_complete": {"anyOf": [ref("Job"), {"type": "null"}]}}},
    }


def gateway_paths(json: Any, ref: Any, errors: dict[str, Any]) -> dict[str, Any]:
    """The POST operations; ``/v1/jobs`` is merged with the admin API's GET listing."""
    replay = {"Idempotent-Replay": {"description": "true: the job already existed",
                                    "schema": {"type": "string", "enum": ["true"]}}}
    limited = {"description": "the tenant's rate limit is exhausted",
               "headers": {"Retry-After": {"description": "whole seconds",
                                           "schema": {"type": "integer", "minimum": 1}}},
               "content": {"application/json": {"schema": ref("Error")}}}
    common = {**errors, "401": json(ref("Error"), "missing or unknown tenant API key"),
              "429": limited}
    one = {
        "summary": "Enqueue one job for the key's tenant",
        "security": _TENANT_KEY,
        "parameters": [{"name": "Idempotency-Key", "in": "header", "required": False,
                        "schema": {"type": "string", "minLength": 1, "maxLength": 512,
                                   "pattern": IDEMPOTENCY_KEY_PATTERN}}],
        "requestBody": {"required": True, "content": {"application/json": {
            "schema": ref("JobRequest")}}},
        "responses": {
            "201": json(ref("GatewayJob"), "created"),
            "200": {**json(ref("GatewayJob"), "an idempotent replay: the existing job"),
                    "headers": replay},
            **common,
            "409": json(ref("Error"), "the Idempotency-Key holds a different job"),
        },
    }
    batch = {
        "summary": f"Enqueue up to {MAX_BATCH} jobs for the key's tenant (all validated first)",
        "security": _TENANT_KEY,
        "requestBody": {"required": True, "content": {"application/json": {
            "schema": ref("BatchRequest")}}},
        "responses": {"200": json(ref("BatchResult"), "one result per job, in order"),
                      **common},
    }
    return {"/v1/jobs": {"post": one}, "/v1/jobs:batch": {"post": batch},
            **workflow_paths(json, ref, common)}


def tenants_path(get: Any, json: Any, ref: Any) -> dict[str, Any]:
    return {"/v1/tenants": get("Tenants: running jobs (fleet-wide) and limits",
                               json(ref("TenantList"), "tenants"))}


def gateway_schemas(ref: Any) -> dict[str, Any]:
    item = _job_properties(ref)
    return {
        "JsonValue": {"anyOf": [
            {"type": "string", "pattern": _NO_NUL},
            {"type": ["number", "boolean", "null"]},
            {"type": "array", "items": ref("JsonValue")},
            ref("Payload"),
        ]},
        "Payload": {"type": "object", "propertyNames": {"pattern": _NO_NUL},
                    "additionalProperties": ref("JsonValue")},
        "JobRequest": {"type": "object", "additionalProperties": False,
                       "required": ["job_type"], "properties": {**item, **_LINKS}, **_WAITS},
        "BatchRequest": {"type": "object", "additionalProperties": False, "required": ["jobs"],
                         "properties": {"jobs": {
                             "type": "array", "minItems": 1, "maxItems": MAX_BATCH,
                             "items": {"type": "object", "additionalProperties": False,
                                       "required": ["job_type"], **_ONE_TIME,
                                       "properties": {**item, "idempotency_key": _nullable({
                                           "type": "string", "minLength": 1, "maxLength": 512,
                                           "pattern": _NO_NUL})}}}}},
        "GatewayJob": {"type": "object", "required": ["job"], "properties": {"job": ref("Job")}},
        "BatchResult": {"type": "object", "required": ["results", "created", "replayed",
                                                       "conflicts"], "properties": {
            "results": {"type": "array", "items": {
                "type": "object", "required": ["index", "outcome", "status"], "properties": {
                    "index": {"type": "integer"},
                    "outcome": {"enum": ["created", "replayed", "conflict"]},
                    "status": {"enum": [200, 201, 409]},
                    "job": ref("Job"), "error": {"type": "object"}}}},
            "created": {"type": "integer"}, "replayed": {"type": "integer"},
            "conflicts": {"type": "integer"}}},
        **workflow_schemas(ref),
        "TenantList": {"type": "object", "required": ["tenants"], "properties": {"tenants": {
            "type": "array", "items": {"type": "object", "required": [
                "tenant", "running", "max_running", "rate_per_s", "burst"], "properties": {
                "tenant": {"type": "string"}, "running": {"type": "integer"},
                "max_running": {"type": ["integer", "null"]},
                "rate_per_s": {"type": "number"}, "burst": {"type": "integer"}}}}}},
    }
