"""``GET /v1/jobs/<id>[?wait_s=]``: a job and its result, read by a tenant with its API key
(the gateway) or by an operator (the admin API), optionally long-polled until the job is
final (docs/results.md).

A tenant sees only its own jobs (any other id is a 404, as if there were none). ``wait_s``
(0..``MAX_WAIT_S``) holds the request until the job is completed, dead or cancelled, or
``wait_s`` passed; the answer is the job either way (still ``running``: ask again). The wait
is the clients' (results/wait.py): woken by PostgreSQL's NOTIFY, one LISTEN connection per
app opened at its first long-poll and closed when the app stops serving.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from quart import Response, jsonify, request
from quart_trio import QuartTrio

from gochatd.admin.http import ApiError
from gochatd.errors import JobFailed, JobNotFound, WaitTimeout
from gochatd.model import Job, JobStatus
from gochatd.results.wait import AsyncWaiter, listen_dsn

if TYPE_CHECKING:
    from gochatd.worker.control import Control

MAX_WAIT_S = 60.0
_FINAL = frozenset({JobStatus.COMPLETED, JobStatus.DEAD, JobStatus.CANCELLED})
_WAITER = "gochatd.waiter"


def install_waiter(app: QuartTrio, daemon: Control) -> None:
    """The app's ``AsyncWaiter``, closed after the app stops serving."""
    settings = daemon.settings
    waiter = AsyncWaiter(listen_dsn(settings.database_listen_url or settings.database_url))
    app.extensions[_WAITER] = waiter

    @app.after_serving
    async def close_waiter() -> None:
        waiter.close()


def wait_arg(raw: str | None) -> float:
    """``wait_s`` as seconds: absent or empty is 0 (answer at once)."""
    if raw is None or raw == "":
        return 0.0
    try:
        value = float(raw)
    except ValueError:
        value = -1.0
    if not 0.0 <= value <= MAX_WAIT_S:
        raise ApiError(400, "bad_request", f"wait_s must be a number of seconds in 0..{MAX_WAIT_S:g}")
    return value


async def read_job(app: QuartTrio, daemon: Control, job_id: int, wait_s: float,
                   tenant: str | None) -> Job:
    """The job (``tenant``: only if it is that tenant's), once final or after ``wait_s``."""
    job = await daemon.store.get_job(job_id)
    if job is None or (tenant is not None and job.tenant_id != tenant):
        raise ApiError(404, "not_found", f"job {job_id} not found")
    if wait_s <= 0 or job.status in _FINAL:
        return job
    waiter: AsyncWaiter = app.extensions[_WAITER]
    try:
        return await waiter.wait(daemon.store.get_job, job_id, wait_s)
    except (JobFailed, WaitTimeout) as exc:  # an answer, not an error: the job says how
        return exc.job
    except JobNotFound:  # deleted or pruned while waited for
        raise ApiError(404, "not_found", f"job {job_id} not found") from None


def register_job_route(app: QuartTrio, daemon: Control) -> None:
    """The route on the gateway's own listener (``gateway.listen``): tenant keys only. On
    the admin API's listener the admin route serves it (admin/api.py)."""
    from gochatd.admin.api import JobIdConverter
    from gochatd.admin.http import job_id_arg
    from gochatd.gateway.api import _caller

    app.url_map.converters["job_id"] = JobIdConverter
    install_waiter(app, daemon)

    @app.get("/v1/jobs/<job_id:job_id>")
    async def get_job(job_id: str) -> Response:
        assert daemon.gateway is not None
        tenant = _caller(daemon.gateway)
        if isinstance(tenant, Response):
            return tenant
        wait_s = wait_arg(request.args.get("wait_s"))
        job = await read_job(app, daemon, job_id_arg(job_id), wait_s, tenant)
        return jsonify(job.to_dict())
