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
from importlib import resources
from typing import TYPE_CHECKING, Any
from urllib.parse import urlsplit

from quart import Response, jsonify, request
from quart_trio import QuartTrio
from werkzeug.exceptions import HTTPException

from gochatd.errors import InvalidTransition, JobNotFound, StoreUnavailable, UserError

if TYPE_CHECKING:
    from gochatd.control import Control

SAFE_METHODS = frozenset({"GET", "HEAD", "OPTIONS"})
#: The gateway's endpoints: authenticated by tenant API keys, not by the admin token.
GATEWAY_PATHS = frozenset({"/v1/jobs", "/v1/jobs:batch"})
#: Served without the admin token (GET/HEAD only): the probes, the dashboard's page and
#: whether a token is required (nothing else).
OPEN_PATHS = frozenset({"/healthz", "/readyz", "/", "/v1/auth"})
#: The dashboard's scripts and style sheet (Quart's static route, admin/static/): served
#: like the page, without the token (they hold no data).
STATIC_PREFIX = "/static/"
#: The page loads only its own files and talks only to this API.
DASHBOARD_CSP = ("default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self' data:; "
                 "connect-src 'self'; base-uri 'none'; form-action 'none'; frame-ancestors 'none'")
#: Headers of werkzeug's HTTP errors worth keeping on our JSON error (405 must say Allow).
_KEPT_ERROR_HEADERS = frozenset({"allow", "www-authenticate", "retry-after"})


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


class ApiError(Exception):
    def __init__(self, status: int, code: str, message: str) -> None:
        super().__init__(message)
        self.status, self.code, self.message = status, code, message


def error_response(status: int, code: str, message: str) -> Response:
    response = jsonify({"error": {"code": code, "message": message}})
    response.status_code = status
    return response


def create_app(daemon: Control) -> QuartTrio:
    app = QuartTrio("gochatd.admin")
    app.config["MAX_CONTENT_LENGTH"] = daemon.settings.admin_max_body_bytes
    app.config["JSON_SORT_KEYS"] = False
    app.extensions["gochatd.control"] = daemon

    @app.before_request
    async def authorize() -> Response | None:
        if request.method == "POST" and request.path in GATEWAY_PATHS:
            return None  # tenants' API keys, checked by gateway/api.py; never the admin token
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

    register_errors(app, daemon)

    _register_dashboard(app)
    from gochatd.admin import api, controls, fleet, periodic, probes, tenants
    from gochatd.outbox import api as outbox_api

    probes.register(app, daemon)
    api.register(app, daemon)
    controls.register(app, daemon)
    outbox_api.register(app, daemon)
    tenants.register(app, daemon)
    fleet.register(app, daemon)
    periodic.register(app, daemon)
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


def _bearer() -> str | None:
    """The credential of ``Authorization: Bearer <credential>`` (scheme case-insensitive)."""
    scheme, _, presented = request.headers.get("Authorization", "").partition(" ")
    if scheme.lower() != "bearer":
        return None
    return presented.strip()


def register_errors(app: QuartTrio, daemon: Control) -> None:
    """Every error as JSON ``{"error": {"code", "message"}}`` (the gateway's app too)."""

    @app.errorhandler(ApiError)
    async def api_error(exc: ApiError) -> Response:
        return error_response(exc.status, exc.code, exc.message)

    @app.errorhandler(JobNotFound)
    async def not_found(exc: JobNotFound) -> Response:
        return error_response(404, "not_found", str(exc))

    @app.errorhandler(InvalidTransition)
    async def conflict(exc: InvalidTransition) -> Response:
        return error_response(409, "invalid_transition", str(exc))

    @app.errorhandler(StoreUnavailable)
    async def store_down(exc: StoreUnavailable) -> Response:
        daemon.log.warning("admin_store_unavailable", path=request.path, error=str(exc))
        response = error_response(503, "store_unavailable", "the database is unreachable; retry")
        response.headers["Retry-After"] = "1"
        return response

    @app.errorhandler(UserError)
    async def bad_input(exc: UserError) -> Response:
        return error_response(400, "bad_request", str(exc))

    @app.errorhandler(HTTPException)
    async def http_error(exc: HTTPException) -> Response:
        code = (exc.name or "error").lower().replace(" ", "_")
        response = error_response(exc.code or 500, code, exc.description or exc.name or "error")
        for name, value in exc.get_headers():
            if name.lower() in _KEPT_ERROR_HEADERS:
                response.headers[name] = value
        return response

    @app.errorhandler(Exception)
    async def internal(exc: Exception) -> Response:
        daemon.log.error("admin_request_failed", error_class=type(exc).__name__,
                         path=request.path)
        return error_response(500, "internal", "internal error; see the daemon log")


def json_body(data: Any, allowed: set[str]) -> dict[str, Any]:
    """Validate a JSON object body against the allowed keys."""
    if data is None:
        return {}
    if not isinstance(data, dict):
        raise ApiError(400, "bad_request", "the body must be a JSON object")
    unknown = sorted(set(data) - allowed)
    if unknown:
        raise ApiError(400, "bad_request", f"unknown fields: {', '.join(unknown[:5])}")
    return data
