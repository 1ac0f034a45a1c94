"""/v1: queues, jobs, drain/pause/resume, reload, the OpenAPI document."""

from __future__ import annotations

import json
from typing import TYPE_CHECKING, Any

from quart import Response, jsonify, request
from quart_trio import QuartTrio
from werkzeug.routing import BaseConverter

from gochatd.admin.app import ApiError, json_body
from gochatd.admin.openapi import openapi_document
from gochatd.config import DEFAULT_QUEUE_WEIGHTS
from gochatd.job_controls import admin_actor
from gochatd.model import MAX_SEARCH_CHARS, Job, JobFilter, JobStatus
from gochatd.registry import QUEUE_RE

if TYPE_CHECKING:
    from gochatd.control import Control

MAX_PAGE = 500
MAX_ID = 2**63 - 1
#: Digits of the largest id (bigint); longer numbers are refused before int() sees them.
MAX_DIGITS = len(str(MAX_ID))


class JobIdConverter(BaseConverter):
    """A job id path segment: anything but ``retry``, ``bulk`` and ``counts``, so
    ``/v1/jobs/retry`` is only the bulk retry and ``/v1/jobs/bulk`` only the bulk control
    (GET there is a 405 with ``Allow: POST``), and ``/v1/jobs/counts`` is never an id; the
    id itself is checked by ``_job_id`` for a 400 that says what is wrong."""

    regex = r"(?!(?:retry|bulk|counts)$)[^/]+"


def job_json(job: Job) -> dict[str, Any]:
    return job.to_dict()


def _int_arg(name: str, raw: str | None, default: int, lo: int, hi: int) -> int:
    if raw is None:
        return default
    if not raw.isascii() or not raw.isdigit() or len(raw) > MAX_DIGITS:
        raise ApiError(400, "bad_request", f"{name} must be an integer in {lo}..{hi}")
    value = int(raw)
    if not lo <= value <= hi:
        raise ApiError(400, "bad_request", f"{name} must be an integer in {lo}..{hi}")
    return value


def _job_id(raw: str) -> int:
    return _int_arg("id", raw, 0, 1, MAX_ID)


def _cursor_arg(raw: str | None) -> int | None:
    """The opaque cursor is the last id of the previous page: up to 19 digits. One past the
    largest possible id simply ends the listing."""
    if raw is None or raw == "":
        return None
    if not raw.isascii() or not raw.isdigit() or len(raw) > MAX_DIGITS:
        raise ApiError(400, "bad_request", "cursor must be the next_cursor of a previous page")
    return min(int(raw), MAX_ID) or None


def _body_int(name: str, raw: Any, default: int, lo: int, hi: int) -> int:
    """A JSON integer (``30.0`` is one too, as JSON Schema says); null means the default."""
    if raw is None:
        return default
    if isinstance(raw, float) and raw.is_integer():
        raw = int(raw)
    if isinstance(raw, bool) or not isinstance(raw, int) or not lo <= raw <= hi:
        raise ApiError(400, "bad_request", f"{name} must be an integer in {lo}..{hi}")
    return raw


def _text_arg(name: str, raw: Any, limit: int = 200) -> str | None:
    if raw is None or raw == "":
        return None
    if not isinstance(raw, str) or len(raw) > limit:
        raise ApiError(400, "bad_request", f"{name} must be a string of at most {limit} characters")
    return raw


def _storable(*values: str | None) -> bool:
    """False when a text filter holds what no stored row can (a NUL, a lone surrogate): the
    answer is then empty, and the database never sees the value."""
    for value in values:
        if value is None:
            continue
        if "\x00" in value:
            return False
        try:
            value.encode("utf-8")
        except UnicodeEncodeError:
            return False
    return True


def _queue_arg(raw: Any) -> str | None:
    value = _text_arg("queue", raw, 64)
    if value is not None and not QUEUE_RE.match(value):
        raise ApiError(400, "bad_request", "queue must match [A-Za-z0-9_-]{1,64}")
    return value


def _flag_arg(name: str, raw: str | None) -> bool:
    if raw is None or raw == "":
        return False
    if raw not in {"true", "false", "1", "0"}:
        raise ApiError(400, "bad_request", f"{name} must be true or false")
    return raw in {"true", "1"}


def _order_arg(raw: str | None) -> bool:
    """``order``: newest (the default) or oldest first; True for newest."""
    if raw is None or raw == "" or raw == "newest":
        return True
    if raw != "oldest":
        raise ApiError(400, "bad_request", "order must be newest or oldest")
    return False


def _status_arg(raw: Any) -> JobStatus | None:
    if raw is None or raw == "":
        return None
    try:
        return JobStatus(raw)
    except ValueError:
        allowed = ", ".join(s.value for s in JobStatus)
        raise ApiError(400, "bad_request", f"status must be one of: {allowed}") from None


async def _body(allowed: set[str]) -> dict[str, Any]:
    """The request body: empty, or a JSON object with only the ``allowed`` keys. Decoded
    here rather than by Quart so that every malformed body is a 400, whatever it holds
    (bytes that are not UTF-8, nesting deep enough to exhaust the parser, huge numbers, a
    body of only whitespace)."""
    raw = await request.get_data(cache=True, as_text=False)
    if not raw:
        return {}
    try:
        data = json.loads(raw)
    except (ValueError, RecursionError):  # UnicodeDecodeError and JSONDecodeError included
        raise ApiError(400, "bad_json", "the body is not valid JSON") from None
    if not isinstance(data, dict):
        raise ApiError(400, "bad_request", "the body must be a JSON object")
    return json_body(data, allowed)


def register(app: QuartTrio, daemon: Control) -> None:
    app.url_map.converters["job_id"] = JobIdConverter
    _register_process(app, daemon)
    _register_queues(app, daemon)
    _register_jobs(app, daemon)


def _register_process(app: QuartTrio, daemon: Control) -> None:
    """This process: its controls, its config, and the documents it serves."""

    @app.get("/v1/openapi.json")
    async def openapi() -> Response:
        gateway = daemon.gateway is not None and not daemon.settings.gateway_listen
        return jsonify(openapi_document(auth_required=bool(daemon.settings.admin_token),
                                        gateway=gateway))

    @app.post("/v1/drain")
    async def drain() -> Response:
        await _body(set())
        exit_flag = request.args.get("exit", "false")
        if exit_flag not in {"true", "false", "1", "0"}:
            raise ApiError(400, "bad_request", "exit must be true or false")
        daemon.drain(exit_when_drained=exit_flag in {"true", "1"})
        return jsonify(daemon.status())

    @app.post("/v1/pause")
    async def pause() -> Response:
        await _body(set())
        daemon.pause()
        return jsonify(daemon.status())

    @app.post("/v1/resume")
    async def resume() -> Response:
        await _body(set())
        if not daemon.resume():
            raise ApiError(409, "stopping", "the worker is stopping and cannot resume")
        return jsonify(daemon.status())

    @app.post("/v1/reload")
    async def reload() -> Response:
        await _body(set())
        applied, restart, reloaded_at = daemon.reload()
        return jsonify({"applied": applied, "needs_restart": restart,
                        "reloaded_at": reloaded_at.isoformat() if reloaded_at else None})

    # -- job types (fleet-wide) ------------------------------------------------------------

    @app.get("/v1/job-types")
    async def job_types() -> Response:
        """The defaults the daemons published for their handlers, and the waiting jobs no
        live daemon can run (docs/job-types.md)."""
        return jsonify({
            "job_types": [t.to_dict() for t in await daemon.store.list_job_types()],
            "without_handler": [w.to_dict() for w in await daemon.jobs_without_handler()],
        })


def _register_queues(app: QuartTrio, daemon: Control) -> None:
    """Queues (fleet-wide): their counts, and pausing them."""

    async def known_queues() -> set[str]:
        stats = await daemon.store.queue_stats()
        return (set(daemon.settings.worker_queues) | set(DEFAULT_QUEUE_WEIGHTS)
                | {s.queue for s in stats} | set(await daemon.store.paused_queues()))

    @app.get("/v1/queues")
    async def queues() -> Response:
        stats = {s.queue: s for s in await daemon.store.queue_stats()}
        paused = await daemon.store.paused_queues()
        names = sorted(set(daemon.settings.worker_queues) | set(stats) | paused)
        out = []
        for name in names:
            s = stats.get(name)
            out.append({
                "queue": name,
                "queued": s.queued if s else 0,
                "delayed": s.delayed if s else 0,
                "running": s.running if s else 0,
                "retrying": s.retrying if s else 0,
                "dead": s.dead if s else 0,
                "oldest_due_age_s": s.oldest_due_age_s if s else None,
                "paused": name in paused,
                "weight": daemon.settings.worker_queues.get(name, 0),
                "max_running": daemon.settings.worker_queue_limits.get(name),
            })
        return jsonify({"queues": out})

    async def set_paused(queue: str, paused: bool) -> Response:
        await _body(set())
        name = _queue_arg(queue)
        assert name is not None
        if name not in await known_queues():
            raise ApiError(404, "unknown_queue", f"no queue named {name!r}")
        if paused:
            changed = await daemon.store.pause_queue(name, daemon.worker_id)
        else:
            changed = await daemon.store.resume_queue(name)
        daemon.log.info("queue_paused" if paused else "queue_resumed", queue=name)
        # This process follows at once; the rest of the fleet within pauses.REFRESH_S.
        await daemon.refresh_pauses()
        return jsonify({"queue": name, "paused": paused, "changed": changed})

    @app.post("/v1/queues/<queue>/pause")
    async def pause_queue(queue: str) -> Response:
        return await set_paused(queue, True)

    @app.post("/v1/queues/<queue>/resume")
    async def resume_queue(queue: str) -> Response:
        return await set_paused(queue, False)


def _register_jobs(app: QuartTrio, daemon: Control) -> None:
    """Jobs (fleet-wide): list, look up, retry, cancel."""

    @app.get("/v1/jobs")
    async def list_jobs() -> Response:
        args = request.args
        flt = JobFilter(
            status=_status_arg(args.get("status")),
            queue=_queue_arg(args.get("queue")),
            tenant_id=_text_arg("tenant", args.get("tenant")),
            job_type=_text_arg("job_type", args.get("job_type")),
            limit=_int_arg("limit", args.get("limit"), 50, 1, MAX_PAGE),
            after_id=_cursor_arg(args.get("cursor")),
            newest_first=_order_arg(args.get("order")),
            search=_text_arg("q", args.get("q"), MAX_SEARCH_CHARS),
            scheduled=_flag_arg("scheduled", args.get("scheduled")),
        )
        storable = _storable(flt.tenant_id, flt.job_type, flt.search)
        jobs = await daemon.store.list_jobs(flt) if storable else []
        cursor = str(jobs[-1].id) if len(jobs) == flt.limit else None
        return jsonify({"jobs": [job_json(j) for j in jobs], "next_cursor": cursor})

    @app.get("/v1/jobs/<job_id:job_id>")
    async def get_job(job_id: str) -> Response:
        job = await daemon.store.get_job(_job_id(job_id))
        if job is None:
            raise ApiError(404, "not_found", f"job {job_id} not found")
        # "attempts" is the job's attempt count already: the runs go beside it.
        runs = await daemon.store.list_job_attempts(job.id)
        return jsonify({**job_json(job), "attempt_history": [a.to_dict() for a in runs]})

    @app.post("/v1/jobs/<job_id:job_id>/retry")
    async def requeue_job(job_id: str) -> Response:
        await _body(set())
        job = await daemon.client.retry(_job_id(job_id), actor=admin_actor(request.remote_addr))
        daemon.log.info("job_requeued", job_id=job.id)
        daemon.new_work()
        return jsonify(job_json(job))

    @app.post("/v1/jobs/<job_id:job_id>/cancel")
    async def cancel_job(job_id: str) -> Response:
        await _body(set())
        job = await daemon.client.cancel(_job_id(job_id), actor=admin_actor(request.remote_addr))
        return jsonify(job_json(job))

    @app.post("/v1/jobs/retry")
    async def requeue_dead_jobs() -> Response:
        body = await _body({"queue", "tenant", "job_type", "limit"})
        flt = JobFilter(
            status=JobStatus.DEAD,
            queue=_queue_arg(body.get("queue")),
            tenant_id=_text_arg("tenant", body.get("tenant")),
            job_type=_text_arg("job_type", body.get("job_type")),
            limit=_body_int("limit", body.get("limit"), 1000, 1, 10_000),
        )
        ids = await daemon.store.requeue_dead_jobs(flt) if _storable(flt.tenant_id, flt.job_type) else []
        daemon.log.info("jobs_requeued", count=len(ids))
        daemon.new_work()
        return jsonify({"retried": len(ids), "ids": ids[:1000]})
