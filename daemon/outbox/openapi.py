"""The /v1/outbox part of the admin API's OpenAPI document (outbox/api.py)."""

from __future__ import annotations

from typing import Any

from gochatd.model import MAX_ID
from gochatd.outbox.model import OutboxStatus

_NULLABLE_STR = {"type": ["string", "null"]}
_ID = {"name": "message_id", "in": "path", "required": True,
       "schema": {"type": "integer", "minimum": 1, "maximum": MAX_ID}}


def outbox_paths(
    get: Any, post: Any, json: Any, ref: Any, text_filter: dict[str, Any]
) -> dict[str, Any]:
    """Built with openapi.py's own helpers (passed in) so both parts read the same."""
    statuses = [s.value for s in OutboxStatus]
    params = [
        {"name": "status", "in": "query", "schema": {"type": "string", "enum": [*statuses, ""]}},
        {"name": "tenant", "in": "query", "schema": text_filter},
        {"name": "channel", "in": "query", "schema": text_filter},
        {"name": "limit", "in": "query", "schema": {"type": "integer", "minimum": 1,
                                                    "maximum": 500}},
        {"name": "cursor", "in": "query", "description": "next_cursor of the previous page",
         "schema": {"type": "string", "pattern": "^[0-9]{0,19}$"}},
    ]
    return {
        "/v1/outbox": get("List reply outbox messages", json(ref("OutboxList"), "messages"),
                          params),
        "/v1/outbox/{message_id}": get("One outbox message",
                                       json(ref("OutboxMessage"), "the message"), [_ID]),
        "/v1/outbox/{message_id}/retry": post("Retry a dead outbox message",
                                              json(ref("OutboxMessage"), "pending again"), [_ID]),
    }


def outbox_schemas(ref: Any) -> dict[str, Any]:
    statuses = [s.value for s in OutboxStatus]
    return {
        "OutboxMessage": {"type": "object", "required": [
            "id", "tenant_id", "channel", "recipient", "body", "dedupe_key", "status",
            "attempts"], "properties": {
            "id": {"type": "integer"}, "tenant_id": {"type": "string"},
            "job_id": {"type": ["integer", "null"]}, "channel": {"type": "string"},
            "recipient": {"type": "string"}, "body": {"type": "object"},
            "dedupe_key": {"type": "string"}, "status": {"enum": statuses},
            "attempts": {"type": "integer"}, "next_attempt_at": {"type": "string"},
            "lease_owner": _NULLABLE_STR, "lease_expires_at": _NULLABLE_STR,
            "provider_message_id": _NULLABLE_STR, "error_class": _NULLABLE_STR,
            "created_at": {"type": "string"}, "updated_at": {"type": "string"},
            "sent_at": _NULLABLE_STR}},
        "OutboxList": {"type": "object", "required": ["messages", "next_cursor"], "properties": {
            "messages": {"type": "array", "items": ref("OutboxMessage")},
            "next_cursor": _NULLABLE_STR}},
    }
