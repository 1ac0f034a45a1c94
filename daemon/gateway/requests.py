"""A gateway request body -> a validated ``EnqueueRequest``.

The tenant comes from the verified API key and the idempotency key from the
``Idempotency-Key`` header (or, in a batch, each item's ``idempotency_key``); a ``tenant_id``
in the body is refused rather than ignored, so a client that thinks it can pick a tenant
learns at once that it cannot. Everything else is checked by ``validate_enqueue``, the same
rules as the CLI and the Python client.
"""

from __future__ import annotations

import math
import re
from datetime import UTC, datetime
from typing import Any

from gochatd.client import validate_enqueue
from gochatd.errors import InvalidJob
from gochatd.model import EnqueueRequest

JOB_FIELDS = frozenset({
    "job_type", "payload", "queue", "delay_s", "scheduled_at", "max_attempts", "priority",
    "traceparent", "unique_for_s", "unique_key",
})
BATCH_ITEM_FIELDS = JOB_FIELDS | {"idempotency_key"}
MAX_BATCH = 1000
TRACEPARENT = re.compile("[0-9a-f]{2}-[0-9a-f]{32}-[0-9a-f]{16}-[0-9a-f]{2}")
#: An Idempotency-Key header: visible ASCII, single spaces inside (what HTTP carries intact).
IDEMPOTENCY_KEY_PATTERN = "^[\\x21-\\x7e]+( [\\x21-\\x7e]+)*$"
IDEMPOTENCY_KEY_RE = re.compile(IDEMPOTENCY_KEY_PATTERN.replace("$", "\\Z"))
#: RFC 3339 with a zone (the OpenAPI document uses the same pattern); years 1000-8999, so
#: that every value converts to UTC.
RFC3339_PATTERN = ("^[1-8][0-9]{3}-[0-9]{2}-[0-9]{2}[Tt][0-9]{2}:[0-9]{2}:[0-9]{2}"
                   "([.][0-9]{1,9})?([Zz]|[+-][0-9]{2}:[0-9]{2})$")
RFC3339 = re.compile(RFC3339_PATTERN.replace("$", "\\Z"))


def parse_job(
    body: Any, *, tenant_id: str, idempotency_key: str | None, max_payload_bytes: int,
    allowed: frozenset[str] = JOB_FIELDS,
) -> EnqueueRequest:
    """Raise InvalidJob naming the field for anything wrong; nothing is written before."""
    if not isinstance(body, dict):
        raise InvalidJob("expected a JSON object")
    if "tenant_id" in body:
        raise InvalidJob("tenant_id: not allowed; the tenant is the one of the API key")
    unknown = sorted(str(k) for k in body if k not in allowed)
    if unknown:
        raise InvalidJob(f"unknown fields: {', '.join(unknown[:5])}")
    if "job_type" not in body:
        raise InvalidJob("job_type: required")
    if "idempotency_key" in body:
        idempotency_key = _optional(body, "idempotency_key", str)
        if idempotency_key is not None and "\x00" in idempotency_key:
            raise InvalidJob("idempotency_key: NUL characters are not allowed")
    queue = _optional(body, "queue", str)
    if queue == "":
        raise InvalidJob("queue: expected 1-64 letters, digits, '_' or '-'")
    traceparent = _optional(body, "traceparent", str)
    if traceparent is not None and not TRACEPARENT.fullmatch(traceparent):
        raise InvalidJob("traceparent: expected a W3C traceparent (00-<32 hex>-<16 hex>-<2 hex>)")
    max_attempts = _optional(body, "max_attempts", int)
    priority = _optional(body, "priority", int)
    delay_s = _optional(body, "delay_s", float)
    scheduled_at = _time(body.get("scheduled_at"))
    unique_for_s = _optional(body, "unique_for_s", float)
    unique_key = _optional(body, "unique_key", str)
    return validate_enqueue(
        body["job_type"], body.get("payload"), queue=queue, tenant_id=tenant_id,
        idempotency_key=idempotency_key, scheduled_at=scheduled_at,
        delay_s=float(delay_s) if delay_s is not None else None, max_attempts=max_attempts,
        priority=priority if priority is not None else 0, traceparent=traceparent,
        max_payload_bytes=max_payload_bytes, unique_for_s=unique_for_s, unique_key=unique_key,
    )


def _optional(body: dict[str, Any], name: str, kind: type) -> Any:
    """The field, checked for its JSON type; null is the same as leaving it out."""
    value = body.get(name)
    if value is None:
        return None
    if kind is int and isinstance(value, float) and value.is_integer():
        value = int(value)  # JSON Schema: 3.0 is an integer
    if kind is float and isinstance(value, int) and not isinstance(value, bool):
        try:
            return float(value)
        except OverflowError:  # a 400-digit integer
            raise InvalidJob(f"{name}: expected a finite number") from None
    if isinstance(value, bool) or not isinstance(value, kind):
        expected = {str: "a string", int: "an integer", float: "a number"}[kind]
        raise InvalidJob(f"{name}: expected {expected}")
    if isinstance(value, float) and not math.isfinite(value):
        raise InvalidJob(f"{name}: expected a finite number")
    return value


def _time(value: Any) -> datetime | None:
    if value is None:
        return None
    if not isinstance(value, str) or not RFC3339.match(value):
        raise InvalidJob("scheduled_at: expected an RFC 3339 time, e.g. 2026-01-01T00:00:00Z")
    try:
        parsed = datetime.fromisoformat(value.replace("Z", "+00:00").replace("z", "+00:00"))
    except ValueError:
        raise InvalidJob("scheduled_at: expected an RFC 3339 time, "
                         "e.g. 2026-01-01T00:00:00Z") from None
    # In UTC: RFC 3339 allows offsets up to ±23:59, PostgreSQL only to ±15:59.
    return parsed.astimezone(UTC)


def parse_batch(
    body: Any, *, tenant_id: str, max_payload_bytes: int
) -> list[EnqueueRequest]:
    """All or nothing: every item is checked before any is written; the error names the
    first bad item's index."""
    if not isinstance(body, dict):
        raise InvalidJob("expected a JSON object {\"jobs\": [...]}")
    if "tenant_id" in body:
        raise InvalidJob("tenant_id: not allowed; the tenant is the one of the API key")
    unknown = sorted(str(k) for k in body if k != "jobs")
    if unknown:
        raise InvalidJob(f"unknown fields: {', '.join(unknown[:5])}")
    items = body.get("jobs")
    if not isinstance(items, list) or not items:
        raise InvalidJob("jobs: expected a non-empty array of jobs")
    if len(items) > MAX_BATCH:
        raise InvalidJob(f"jobs: at most {MAX_BATCH} jobs per batch, got {len(items)}")
    requests = []
    for index, item in enumerate(items):
        try:
            requests.append(parse_job(item, tenant_id=tenant_id, idempotency_key=None,
                                      max_payload_bytes=max_payload_bytes,
                                      allowed=BATCH_ITEM_FIELDS))
        except InvalidJob as exc:
            raise InvalidJob(f"jobs[{index}]: {exc}") from None
    return requests
