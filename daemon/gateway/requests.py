"""A gateway request body -> a validated ``EnqueueRequest``.

The tenant comes from the verified API key and the idempotency key from the
``Idempotency-Key`` header (or, in a batch, each item's ``idempotency_key``); a ``tenant_id``
in the body is refused rather than ignored, so a client that thinks it can pick a tenant
learns at once that it cannot. Everything else is checked by ``validate_enqueue``, the same
rules as the CLI and the Python client.
"""

from __future__ import annotations

import contextlib
import math
import re
from collections.abc import Iterator
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Any

from gochatd.admin.http import ApiError
from gochatd.client.client import validate_enqueue
from gochatd.client.workflows import dependency_ids
from gochatd.errors import InvalidJob
from gochatd.model import EnqueueRequest
from gochatd.workflows.model import MAX_DEPENDENCIES, MAX_WORKFLOW_ITEMS

if TYPE_CHECKING:
    from gochatd.gateway.gateway import Gateway

JOB_FIELDS = frozenset({
    "job_type", "payload", "queue", "delay_s", "scheduled_at", "max_attempts", "priority",
    "traceparent", "unique_for_s", "unique_key",
})
BATCH_ITEM_FIELDS = JOB_FIELDS | {"idempotency_key"}
#: POST /v1/jobs: a job may wait for jobs that exist (docs/workflows.md).
LINKED_JOB_FIELDS = JOB_FIELDS | {"depends_on", "run_if_failed"}
#: A job that waits (a chain's link, a batch's callback) starts when its dependencies let
#: it: no delay, no due time, not a unique job.
WAITING_FIELDS = JOB_FIELDS - {"delay_s", "scheduled_at", "unique_for_s", "unique_key"}
#: A batch's member may be delayed, but is no unique job: a duplicate answered with the
#: pending job would not be this batch's member, and the batch would never finish.
MEMBER_FIELDS = JOB_FIELDS - {"unique_for_s", "unique_key"}
MAX_BATCH = 1000
#: Members of one POST /v1/batches: the workflow limit less room for both callbacks.
MAX_BATCH_MEMBERS = MAX_WORKFLOW_ITEMS - 2
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


def parse_links(body: dict[str, Any]) -> tuple[tuple[int, ...], bool]:
    """POST /v1/jobs's ``depends_on`` (job ids, distinct, in order) and ``run_if_failed``;
    null or an empty list: no dependencies."""
    run_if_failed = body.get("run_if_failed")
    if run_if_failed is not None and not isinstance(run_if_failed, bool):
        raise InvalidJob("run_if_failed: expected a boolean")
    raw = body.get("depends_on")
    if raw is None:
        return (), bool(run_if_failed)
    if not isinstance(raw, list):
        raise InvalidJob("depends_on: expected an array of job ids")
    if len(raw) > MAX_DEPENDENCIES:  # counted as sent, as the OpenAPI document's maxItems
        raise InvalidJob(f"depends_on: at most {MAX_DEPENDENCIES} jobs")
    # JSON Schema: 3.0 is an integer (inf and nan are not).
    ids = [int(v) if isinstance(v, float) and v.is_integer() else v for v in raw]
    return dependency_ids(ids), bool(run_if_failed)


def parse_jobs(body: Any, name: str, *, tenant_id: str, max_payload_bytes: int,
               allowed: frozenset[str], most: int) -> list[EnqueueRequest]:
    """``body[name]``: a non-empty array of jobs, each checked (the error names its index)."""
    items = body.get(name)
    if not isinstance(items, list) or not items:
        raise InvalidJob(f"{name}: expected a non-empty array of jobs")
    if len(items) > most:
        raise InvalidJob(f"{name}: at most {most} jobs, got {len(items)}")
    return [parse_item(item, f"{name}[{index}]", tenant_id=tenant_id,
                       max_payload_bytes=max_payload_bytes, allowed=allowed)
            for index, item in enumerate(items)]


def parse_item(item: Any, where: str, *, tenant_id: str, max_payload_bytes: int,
               allowed: frozenset[str]) -> EnqueueRequest:
    try:
        return parse_job(item, tenant_id=tenant_id, idempotency_key=None,
                         max_payload_bytes=max_payload_bytes, allowed=allowed)
    except InvalidJob as exc:
        raise InvalidJob(f"{where}: {exc}") from None


def check_fields(body: Any, allowed: frozenset[str], shape: str) -> dict[str, Any]:
    """A workflow body: an object with only ``allowed`` keys, and no tenant_id."""
    if not isinstance(body, dict):
        raise InvalidJob(f"expected a JSON object {shape}")
    if "tenant_id" in body:
        raise InvalidJob("tenant_id: not allowed; the tenant is the one of the API key")
    unknown = sorted(str(k) for k in body if k not in allowed)
    if unknown:
        raise InvalidJob(f"unknown fields: {', '.join(unknown[:5])}")
    return body


@contextlib.contextmanager
def counted_as_invalid(gateway: Gateway, tenant: str) -> Iterator[None]:
    """An ``InvalidJob`` raised inside: counted as the tenant's invalid request and answered
    400 ``bad_request`` with its message (every route of the gateway)."""
    try:
        yield
    except InvalidJob as exc:
        gateway.count(tenant, "invalid")
        raise ApiError(400, "bad_request", str(exc)) from None
