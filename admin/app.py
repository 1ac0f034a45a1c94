"""The admin app: JSON everywhere (errors included), the routes of ``admin/api.py`` and
``admin/probes.py``, the dashboard at ``/``.

Auth: with an admin token set, every request needs ``Authorization: Bearer <token>``, reads
included, except the probes (``/healthz``, ``/readyz``: a load balancer has no token), the
dashboard's page and its files under ``/static/`` (no data: it asks for the token and sends
it with every API call) and ``/v1/auth`` (only whether a token is required: the page's token
field says so before the operator types one).
Without a token the API answers loopback Host names only. A tenant's gateway key never
opens an admin route, token or not (the gateway may share this listener)."""

from __future__ import annotations

import hmac
import ipaddress
import re
from importlib import resources
from typing import TYPE_CHECKING
from urllib.parse import urlsplit

from quart import Response, request
from quart_trio import QuartTrio

from gochatd.admin.http import error_response, register_errors, reject_unknown_query
from gochatd.admin.openapi import openapi_document

if TYPE_CHECKING:
    from gochatd.worker.control import Control

SAFE_METHODS = frozenset({"GET", "HEAD", "OPTIONS"})
#: The gateway's endpoints: authenticated by tenant API keys, not by the admin token.
GATEWAY_PATHS = frozenset({"/v1/jobs", "/v1/jobs:batch", "/v1/chains", "/v1/batches"})
#: The one admin path a tenant key may GET: its own job (docs/results.md).
TENANT_JOB_READ = re.compile(r"/v1/jobs/(?!(?:retry|bulk|counts)$)[^/]+")
#: Served without the admin token (GET/HEAD only): the probes, the dashboard's page and
#: whether a token is required (nothing else).
OPEN_PATHS = frozenset({"/healthz", "/readyz", "/", "/v1/auth"})
#: The dashboard's scripts and style sheet (Quart's static route, admin/static/): served
#: like the page, without the token (they hold no data).
STATIC_PREFIX = "/static/"
#: The page loads only its own files and talks only to this API.
DASHBOARD_CSP = ("default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self' data:; "
                 "connect-src 'self'; base-uri 'none'; form-action 'none'; frame-ancestors 'none'")


def is_loopback_host(host: str) -> bool:
    """Whether a Host header names this machine literally (localhost, 127.0.0.0/8, [::1])."""
    name = host.strip().lower()
    if name.startswith("["):
        name = name[1:].partition("]")[0]
    elif name.count(":") == 1:
        name = name.partition(":")[0]
    if name == "localhost" or name.endswith(".localhost"):
        return True
    try:
        return ipaddress.ip_address(name).is_loopback
    except ValueError:
        return False


def create_app(daemon: Control) -> QuartTrio:
    app = QuartTrio("gochatd.admin")
    app.config["MAX_CONTENT_LENGTH"] = daemon.settings.admin_max_body_bytes
    app.config["JSON_SORT_KEYS"] = False
    app.extensions["gochatd.worker.control"] = daemon

    @app.before_request
    async def authorize() -> Response | None:
        if request.method == "POST" and request.path in GATEWAY_PATHS:
            return None  # tenants' API keys, checked by gateway/api.py; never the admin token
        if TENANT_JOB_READ.fullmatch(request.path) and gateway_tenant(daemon) is not None:
            return None  # GET /v1/jobs/<id> with a tenant key: its own job (gateway/jobs.py)
        token = daemon.settings.admin_token
        if not token and request.host and not is_loopback_host(request.host):
            # Without a token the API trusts whoever can reach loopback. A Host naming
            # another site means a browser was pointed here by DNS rebinding: refuse it.
            return error_response(403, "host_not_allowed",
                                  "without an admin token only loopback Host names are served")
        presented = _bearer()
        gateway = daemon.gateway
        if presented and gateway is not None and gateway.keys.tenant_for(presented):
            return error_response(403, "tenant_key", "a tenant's API key does not open the "
                                  "admin API")
        safe = request.method in SAFE_METHODS
        if safe and (request.path in OPEN_PATHS or request.path.startswith(STATIC_PREFIX)):
            return None
        origin = request.headers.get("Origin")
        if not safe and origin and urlsplit(origin).netloc.lower() != request.host.lower():
            # A page on another site must not drive this API from an operator's browser.
            return error_response(403, "cross_origin", "cross-origin requests are refused")
        if not token:
            return None  # only reachable on loopback: checked at start
        if presented is None or not hmac.compare_digest(presented.encode(), token.encode()):
            response = error_response(401, "unauthorized", "a valid bearer token is required")
            response.headers["WWW-Authenticate"] = 'Bearer realm="gochatd"'
            return response
        return None

    reject_unknown_query(app, openapi_document(gateway=True))
    register_errors(app, daemon)

    _register_dashboard(app)
    from gochatd.admin import api, controls, fleet, periodic, probes, tenants, workflows
    from gochatd.outbox import api as outbox_api

    probes.register(app, daemon)
    api.register(app, daemon)
    controls.register(app, daemon)
    outbox_api.register(app, daemon)
    tenants.register(app, daemon)
    fleet.register(app, daemon)
    periodic.register(app, daemon)
    workflows.register(app, daemon)
    if daemon.gateway is not None and not daemon.settings.gateway_listen:
        from gochatd.gateway import api as gateway_api

        gateway_api.register(app, daemon)
    else:
        _register_gateway_elsewhere(app, daemon)
    return app


def _register_dashboard(app: QuartTrio) -> None:
    """The page at ``/``; its scripts and style sheet are Quart's static route (/static/)."""

    @app.get("/")
    async def dashboard() -> Response:
        html = resources.files("gochatd.admin").joinpath("static", "index.html").read_text("utf-8")
        return Response(html, content_type="text/html; charset=utf-8",
                        headers={"Cache-Control": "no-store",
                                 "Content-Security-Policy": DASHBOARD_CSP})


def _register_gateway_elsewhere(app: QuartTrio, daemon: Control) -> None:
    """POST /v1/jobs where this listener does not serve the gateway: say why, rather than
    405 (the path exists for GET: the admin API's listing)."""
    if daemon.gateway is None:
        code, message = "gateway_off", ("the gateway is off on this daemon (--worker-only or "
                                        "gateway.listen: off); enqueue through a daemon "
                                        "that runs it")
    else:
        code, message = "gateway_not_here", ("the gateway listens on its own address "
                                             "(gateway.listen), not on the admin API's")

    async def gateway_elsewhere() -> Response:
        return error_response(404, code, message)

    for path in sorted(GATEWAY_PATHS):
        app.add_url_rule(path, f"gateway_elsewhere_{path}", gateway_elsewhere, methods=["POST"])


def gateway_tenant(daemon: Control) -> str | None:
    """The tenant whose gateway key this GET presents, when the gateway is served on this
    listener; None for anyone else (the operator)."""
    presented = _bearer()
    gateway = daemon.gateway
    if (request.method != "GET" or not presented or gateway is None
            or daemon.settings.gateway_listen):
        return None
    return gateway.keys.tenant_for(presented)


def _bearer() -> str | None:
    """The credential of ``Authorization: Bearer <credential>`` (scheme case-insensitive)."""
    scheme, _, presented = request.headers.get("Authorization", "").partition(" ")
    if scheme.lower() != "bearer":
        return None
    return presented.strip()
