"""/v1: queues, jobs, drain/pause/resume, reload, the OpenAPI document."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from quart import Response, jsonify, request
from quart_trio import QuartTrio
from werkzeug.routing import BaseConverter

from gochatd.admin.app import gateway_tenant
from gochatd.admin.http import (
    MAX_PAGE,
    ApiError,
    body_int,
    cursor_arg,
    flag_arg,
    int_arg,
    job_id_arg,
    order_arg,
    queue_arg,
    read_body,
    status_arg,
    storable,
    text_arg,
)
from gochatd.admin.openapi import openapi_document
from gochatd.admin.workflows import links_json
from gochatd.client.job_controls import admin_actor
from gochatd.config.settings import DEFAULT_QUEUE_WEIGHTS
from gochatd.gateway.jobs import install_waiter, read_job, wait_arg
from gochatd.model import MAX_SEARCH_CHARS, Job, JobFilter, JobStatus

if TYPE_CHECKING:
    from gochatd.worker.control import Control



class JobIdConverter(BaseConverter):
    """A job id path segment: anything but ``retry``, ``bulk`` and ``counts``, so
    ``/v1/jobs/retry`` is only the bulk retry and ``/v1/jobs/bulk`` only the bulk control
    (GET there is a 405 with ``Allow: POST``), and ``/v1/jobs/counts`` is never an id; the
    id itself is checked by ``job_id`` for a 400 that says what is wrong."""

    regex = r"(?!(?:retry|bulk|counts)$)[^/]+"


def job_json(job: Job) -> dict[str, Any]:
    return job.to_dict()


async def operator_job_json(daemon: Control, job: Job) -> dict[str, Any]:
    """The operator's answer: the job, its runs (beside ``attempts``, the count) and its place
    in a workflow (admin/workflows.py)."""
    runs = await daemon.store.list_job_attempts(job.id)
    return {**job_json(job), "attempt_history": [a.to_dict() for a in runs],
            **await links_json(daemon, job.id)}


def register(app: QuartTrio, daemon: Control) -> None:
    app.url_map.converters["job_id"] = JobIdConverter
    install_waiter(app, daemon)  # GET /v1/jobs/<id>?wait_s= (gateway/jobs.py)
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
        await read_body(set())
        exit_flag = request.args.get("exit", "false")
        if exit_flag not in {"true", "false", "1", "0"}:
            raise ApiError(400, "bad_request", "exit must be true or false")
        daemon.drain(exit_when_drained=exit_flag in {"true", "1"})
        return jsonify(daemon.status())

    @app.post("/v1/pause")
    async def pause() -> Response:
        await read_body(set())
        daemon.pause()
        return jsonify(daemon.status())

    @app.post("/v1/resume")
    async def resume() -> Response:
        await read_body(set())
        if not daemon.resume():
            raise ApiError(409, "stopping", "the worker is stopping and cannot resume")
        return jsonify(daemon.status())

    @app.post("/v1/reload")
    async def reload() -> Response:
        await read_body(set())
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
        rates = daemon.settings.worker_queue_rates
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
                "rate": str(rates[name]) if name in rates else None,  # as written: 10/s
            })
        return jsonify({"queues": out})

    async def set_paused(queue: str, paused: bool) -> Response:
        await read_body(set())
        name = queue_arg(queue)
        assert name is not None
        if name not in await known_queues():
            raise ApiError(404, "unknown_queue", f"no queue named {name!r}")
        if paused:
            changed = await daemon.store.pause_queue(name, daemon.worker_id)
        else:
            changed = await daemon.store.resume_queue(name)
        daemon.log.info("queue_paused" if paused else "queue_resumed", queue=name)
        # This process follows at once; the rest of the fleet on the NOTIFY (loops/pauses.py).
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
            status=status_arg(args.get("status")),
            queue=queue_arg(args.get("queue")),
            tenant_id=text_arg("tenant", args.get("tenant")),
            job_type=text_arg("job_type", args.get("job_type")),
            limit=int_arg("limit", args.get("limit"), 50, 1, MAX_PAGE),
            after_id=cursor_arg(args.get("cursor")),
            newest_first=order_arg(args.get("order")),
            search=text_arg("q", args.get("q"), MAX_SEARCH_CHARS),
            scheduled=flag_arg("scheduled", args.get("scheduled")),
        )
        findable = storable(flt.tenant_id, flt.job_type, flt.search)
        jobs = await daemon.store.list_jobs(flt) if findable else []
        cursor = str(jobs[-1].id) if len(jobs) == flt.limit else None
        return jsonify({"jobs": [job_json(j) for j in jobs], "next_cursor": cursor})

    @app.get("/v1/jobs/<job_id:job_id>")
    async def get_job(job_id: str) -> Response:
        # A tenant's key here is the gateway's read of its own job (admin/app.py lets it by).
        tenant, wait_s = gateway_tenant(daemon), wait_arg(request.args.get("wait_s"))
        job = await read_job(app, daemon, job_id_arg(job_id), wait_s, tenant)
        if tenant is not None:  # the gateway's answer: no attempts
            return jsonify(job.to_dict())
        return jsonify(await operator_job_json(daemon, job))

    @app.post("/v1/jobs/<job_id:job_id>/retry")
    async def requeue_job(job_id: str) -> Response:
        await read_body(set())
        job = await daemon.client.retry(job_id_arg(job_id), actor=admin_actor(request.remote_addr))
        daemon.log.info("job_requeued", job_id=job.id)
        daemon.new_work()
        return jsonify(job_json(job))

    @app.post("/v1/jobs/<job_id:job_id>/cancel")
    async def cancel_job(job_id: str) -> Response:
        await read_body(set())
        job = await daemon.client.cancel(job_id_arg(job_id), actor=admin_actor(request.remote_addr))
        return jsonify(job_json(job))

    @app.post("/v1/jobs/retry")
    async def requeue_dead_jobs() -> Response:
        body = await read_body({"queue", "tenant", "job_type", "limit"})
        flt = JobFilter(
            status=JobStatus.DEAD,
            queue=queue_arg(body.get("queue")),
            tenant_id=text_arg("tenant", body.get("tenant")),
            job_type=text_arg("job_type", body.get("job_type")),
            limit=body_int("limit", body.get("limit"), 1000, 1, 10_000),
        )
        ids = await daemon.store.requeue_dead_jobs(flt) if storable(flt.tenant_id, flt.job_type) else []
        daemon.log.info("jobs_requeued", count=len(ids))
        daemon.new_work()
        return jsonify({"retried": len(ids), "ids": ids[:1000]})
