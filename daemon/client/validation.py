"""Enqueue input, checked before anything is written: one job (``validate_enqueue``), a
batch (``validate_batch``) and a listing's filters (``validate_filter``). Every message
names the field it refuses; the client, the gateway and the periodic enqueuer share them."""

from __future__ import annotations

import hashlib
import json
import math
import re
from collections.abc import Mapping, Sequence
from datetime import UTC, datetime
from typing import Any

from gochatd.errors import InvalidJob
from gochatd.model import MAX_ID, MAX_SEARCH_CHARS, EnqueueRequest, JobFilter, JobSelection
from gochatd.new_job import NewJob, as_new_job
from gochatd.worker.registry import JOB_TYPE_RE, QUEUE_RE, REGISTRY

_TRACEPARENT = re.compile(r"^[0-9a-f]{2}-[0-9a-f]{32}-[0-9a-f]{16}-[0-9a-f]{2}$")
#: The most items one ``enqueue_many`` call takes (one INSERT); split larger batches.
MAX_BATCH = 10_000
#: The longest window a unique job may ask for (unique_for_s).
MAX_UNIQUE_FOR_S = 30 * 86400
_FIELD_MESSAGE = re.compile(r"^(\w+): ")
#: canonical_json's form, refusing NaN and Infinity (not JSON) in the same pass. Built once:
#: json.dumps with options builds a new encoder on every call.
_STRICT_CANONICAL = json.JSONEncoder(
    sort_keys=True, separators=(",", ":"), ensure_ascii=False, allow_nan=False
)


def validate_enqueue(
    job_type: str,
    payload: Any,
    *,
    queue: str | None,
    tenant_id: str,
    idempotency_key: str | None,
    scheduled_at: datetime | None,
    delay_s: float | None,
    max_attempts: int | None,
    priority: int,
    traceparent: str | None,
    max_payload_bytes: int,
    dispatch_now: bool = False,
    unique_key: str | None = None,
    unique_for_s: float | None = None,
) -> EnqueueRequest:
    """Refuse bad input before anything is written. Every message names the field."""
    if not isinstance(job_type, str) or not JOB_TYPE_RE.match(job_type) or len(job_type) > 200:
        raise InvalidJob("job_type: expected letters, digits, '_', '-', '.' and ':' (max 200)")
    # Left out: a handler imported in this process decides, else the store fills in what a
    # daemon published for the type, else "default" and 25 (docs/job-types.md).
    spec = REGISTRY.get(job_type)
    queue = queue or (spec.queue if spec else None)
    if queue is not None and (not isinstance(queue, str) or not QUEUE_RE.match(queue)):
        raise InvalidJob("queue: expected 1-64 letters, digits, '_' or '-'")
    payload, payload_json = _checked_payload(payload, max_payload_bytes)
    _check_identity(tenant_id, idempotency_key)
    _check_when(scheduled_at, delay_s)
    attempts = max_attempts if max_attempts is not None else (spec.max_attempts if spec else None)
    _check_run_fields(attempts, priority, traceparent)
    if unique_key is not None or unique_for_s is not None:
        unique_key = _unique_key(job_type, payload_json, unique_key, unique_for_s)
    return EnqueueRequest(
        job_type=job_type,
        payload=payload,
        queue=queue,
        tenant_id=tenant_id,
        idempotency_key=idempotency_key,
        delay_s=delay_s,
        scheduled_at=scheduled_at,
        max_attempts=attempts,
        priority=priority,
        traceparent=traceparent,
        dispatch_now=dispatch_now,
        unique_key=unique_key,
        unique_for_s=float(unique_for_s) if unique_for_s is not None else None,
        payload_json=payload_json,
    )


def _unique_key(job_type: str, payload_json: str, unique_key: str | None,
                unique_for_s: float | None) -> str:
    """The key a unique job holds: the one given, else ``<job_type>:<sha256 of the
    payload's canonical JSON>`` (docs/unique-jobs.md, which plain SQL producers follow)."""
    if unique_for_s is not None and (
        isinstance(unique_for_s, bool) or not isinstance(unique_for_s, int | float)
        or not math.isfinite(unique_for_s) or not 0 <= unique_for_s <= MAX_UNIQUE_FOR_S
    ):
        raise InvalidJob(f"unique_for_s: expected 0 to {MAX_UNIQUE_FOR_S} seconds (30 days)")
    if unique_key is None:
        digest = hashlib.sha256(payload_json.encode("utf-8")).hexdigest()
        return f"{job_type}:{digest}"
    if not isinstance(unique_key, str) or not 1 <= len(unique_key) <= 512 or not _is_text(
            unique_key) or "\x00" in unique_key:
        raise InvalidJob("unique_key: expected 1-512 characters of text")
    return unique_key


def _checked_payload(payload: Any, max_payload_bytes: int) -> tuple[dict[str, Any], str]:
    """A JSON object (None: empty) of at most ``max_payload_bytes``, and its canonical form."""
    if payload is None:
        payload = {}
    if not isinstance(payload, dict):
        raise InvalidJob("payload: expected a JSON object")
    try:
        encoded = _STRICT_CANONICAL.encode(payload)
        json.loads(encoded)
        size = len(encoded.encode("utf-8"))  # lone surrogates are not text
    except (TypeError, ValueError, RecursionError) as exc:
        raise InvalidJob(f"payload: not JSON-serialisable ({type(exc).__name__})") from None
    if size > max_payload_bytes:
        raise InvalidJob(f"payload: {size} bytes is over the limit of {max_payload_bytes}")
    if "\x00" in encoded or "\\u0000" in encoded:
        raise InvalidJob("payload: NUL characters are not allowed")
    return payload, encoded


def _check_identity(tenant_id: str, idempotency_key: str | None) -> None:
    if not isinstance(tenant_id, str) or not 1 <= len(tenant_id) <= 200 or not _is_text(tenant_id):
        raise InvalidJob("tenant_id: expected 1-200 characters of text")
    if idempotency_key is not None and (
        not isinstance(idempotency_key, str) or not 1 <= len(idempotency_key) <= 512
        or not _is_text(idempotency_key)
    ):
        raise InvalidJob("idempotency_key: expected 1-512 characters of text")


def _check_when(scheduled_at: datetime | None, delay_s: float | None) -> None:
    if scheduled_at is not None and delay_s is not None:
        raise InvalidJob("give either scheduled_at or delay_s, not both")
    if scheduled_at is not None and scheduled_at.tzinfo is None:
        raise InvalidJob("scheduled_at: needs a time zone (for example 2026-01-01T00:00:00Z)")
    if scheduled_at is not None:
        try:
            scheduled_at.astimezone(UTC)
        except OverflowError:
            raise InvalidJob("scheduled_at: expected a time between the years 1 and 9999 "
                             "in UTC") from None
    if delay_s is not None and (not math.isfinite(delay_s) or not 0 <= delay_s <= 10 * 365 * 86400):
        raise InvalidJob("delay_s: expected 0 to 10 years in seconds")


def _check_run_fields(attempts: int | None, priority: int, traceparent: str | None) -> None:
    """max_attempts, priority and traceparent."""
    if attempts is not None and (
        isinstance(attempts, bool) or not isinstance(attempts, int) or not 1 <= attempts <= 1000
    ):
        raise InvalidJob("max_attempts: expected an integer in 1..1000")
    if isinstance(priority, bool) or not isinstance(priority, int) or not -1000 <= priority <= 1000:
        raise InvalidJob("priority: expected an integer in -1000..1000")
    if traceparent is not None and not _TRACEPARENT.match(traceparent):
        raise InvalidJob("traceparent: expected a W3C traceparent (00-<32 hex>-<16 hex>-<2 hex>)")


def validate_batch(
    items: Sequence[NewJob | Mapping[str, Any]], max_payload_bytes: int,
    dispatch_now: bool = False,
) -> list[EnqueueRequest]:
    """Validate every item before anything is written; the first bad one is refused with its
    index and field (``requests[3].queue: …``)."""
    if isinstance(items, str | bytes | Mapping) or not isinstance(items, Sequence):
        raise InvalidJob("requests: expected a list of jobs")
    if len(items) > MAX_BATCH:
        raise InvalidJob(f"requests: {len(items)} jobs is over the limit of {MAX_BATCH} per call")
    requests = []
    for index, item in enumerate(items):
        new = as_new_job(item, index)
        try:
            requests.append(validate_enqueue(
                new.job_type, new.payload, queue=new.queue, tenant_id=new.tenant_id,
                idempotency_key=new.idempotency_key, scheduled_at=new.scheduled_at,
                delay_s=new.delay_s, max_attempts=new.max_attempts, priority=new.priority,
                traceparent=new.traceparent, max_payload_bytes=max_payload_bytes,
                dispatch_now=dispatch_now, unique_key=new.unique_key,
                unique_for_s=new.unique_for_s,
            ))
        except InvalidJob as exc:
            message = str(exc)
            if _FIELD_MESSAGE.match(message):
                raise InvalidJob(f"requests[{index}].{message}") from None
            raise InvalidJob(f"requests[{index}]: {message}") from None
    return requests


def validate_filter(flt: JobFilter) -> JobFilter:
    """A listing's filters, by the rules enqueue applies to the same fields: a value no job
    can have is refused rather than matched against nothing."""
    if flt.queue is not None and (not isinstance(flt.queue, str) or not QUEUE_RE.match(flt.queue)):
        raise InvalidJob("queue: expected 1-64 letters, digits, '_' or '-'")
    if flt.tenant_id is not None and (
        not isinstance(flt.tenant_id, str) or not 1 <= len(flt.tenant_id) <= 200
        or not _is_text(flt.tenant_id)
    ):
        raise InvalidJob("tenant_id: expected 1-200 characters of text")
    if flt.job_type is not None and (
        not isinstance(flt.job_type, str) or not JOB_TYPE_RE.match(flt.job_type)
        or len(flt.job_type) > 200
    ):
        raise InvalidJob("job_type: expected letters, digits, '_', '-', '.' and ':' (max 200)")
    if flt.search is not None and (
        not isinstance(flt.search, str) or not 1 <= len(flt.search) <= MAX_SEARCH_CHARS
        or "\x00" in flt.search or not _is_text(flt.search)
    ):
        raise InvalidJob(f"search: expected 1-{MAX_SEARCH_CHARS} characters of text")
    return flt


def _is_text(value: str) -> bool:
    """Encodable as UTF-8 (no lone surrogates, which undecodable argv bytes become)."""
    try:
        value.encode("utf-8")
    except UnicodeEncodeError:
        return False
    return True


#: The most ids one bulk control takes (``POST /v1/jobs/bulk``, ``jobs bulk --ids``).
MAX_BULK_IDS = 10_000


def validate_selection(selection: JobSelection, *, filter_rules: bool = True) -> JobSelection:
    """A bulk control's selection: ids (1..MAX_BULK_IDS positive ids) or at least one filter,
    each filter by the rules of ``validate_filter`` (unless ``filter_rules`` is False: the
    admin API, where a filter no job can have matches nothing, as its listing does). An
    empty selection would take every job, so it is refused: say ``--status`` (or another
    filter) to mean a whole class."""
    if selection.ids is not None:
        if not selection.ids or len(selection.ids) > MAX_BULK_IDS:
            raise InvalidJob(f"ids: expected 1 to {MAX_BULK_IDS} job ids")
        if any(isinstance(i, bool) or not isinstance(i, int) or not 1 <= i <= MAX_ID
               for i in selection.ids):
            raise InvalidJob(f"ids: expected job ids (integers in 1..{MAX_ID})")
    if selection.is_empty:
        raise InvalidJob("a bulk control needs ids or at least one filter "
                         "(status, queue, job_type, tenant_id)")
    if filter_rules:
        validate_filter(JobFilter(queue=selection.queue, tenant_id=selection.tenant_id,
                                  job_type=selection.job_type))
    return selection
