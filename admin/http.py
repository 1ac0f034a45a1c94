"""The HTTP request helpers the admin API and the features' routes share (the gateway's and
the outbox's too): the JSON error (``ApiError``, ``error_response``, ``register_errors``),
the body (``read_body``, ``json_body``) and the query and body arguments, each checked into a
400 that names what is wrong."""

from __future__ import annotations

import json
import re
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

from quart import Response, jsonify, request
from quart_trio import QuartTrio
from werkzeug.exceptions import HTTPException

from gochatd.errors import InvalidTransition, JobNotFound, StoreUnavailable, UserError
from gochatd.model import MAX_ID, JobStatus
from gochatd.worker.registry import QUEUE_RE

if TYPE_CHECKING:
    from gochatd.worker.control import Control

MAX_PAGE = 500
#: Digits of the largest id (bigint); longer numbers are refused before int() sees them.
MAX_DIGITS = len(str(MAX_ID))
#: Headers of werkzeug's HTTP errors worth keeping on our JSON error (405 must say Allow).
_KEPT_ERROR_HEADERS = frozenset({"allow", "www-authenticate", "retry-after"})


class ApiError(Exception):
    def __init__(self, status: int, code: str, message: str) -> None:
        super().__init__(message)
        self.status, self.code, self.message = status, code, message


def error_response(status: int, code: str, message: str) -> Response:
    response = jsonify({"error": {"code": code, "message": message}})
    response.status_code = status
    return response


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


#: A Quart rule's ``<converter:name>`` or ``<name>``: OpenAPI's ``{name}``.
_RULE_VARIABLE = re.compile(r"<(?:[^:<>]+:)?([^<>]+)>")
_METHODS = frozenset({"get", "post", "put", "patch", "delete"})


def query_names(document: Mapping[str, Any]) -> dict[tuple[str, str], frozenset[str]]:
    """The query parameters each (METHOD, OpenAPI path) of ``document`` takes."""
    names: dict[tuple[str, str], frozenset[str]] = {}
    for path, item in document["paths"].items():
        for method, operation in item.items():
            if method in _METHODS:
                params = [*item.get("parameters", []), *operation.get("parameters", [])]
                names[method.upper(), path] = frozenset(
                    p["name"] for p in params if p.get("in") == "query")
    return names


def reject_unknown_query(app: QuartTrio, document: Mapping[str, Any]) -> None:
    """A 400 for a query parameter the route's OpenAPI operation does not declare: a typo
    (``?wiat_s=5``) is named as wrong rather than silently ignored. Routes outside the
    document (the dashboard's page and files) are not checked."""
    allowed = query_names(document)

    @app.before_request
    async def unknown_query() -> Response | None:
        rule = request.url_rule
        if rule is None or not request.args:
            return None
        method = "GET" if request.method == "HEAD" else request.method
        names = allowed.get((method, _RULE_VARIABLE.sub(r"{\1}", rule.rule)))
        if names is None or set(request.args) <= names:
            return None
        takes = ", ".join(sorted(names)) or "none"
        return error_response(400, "bad_request",
                              f"unknown query parameter; this route takes: {takes}")


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


def int_arg(name: str, raw: str | None, default: int, lo: int, hi: int) -> int:
    if raw is None:
        return default
    if not raw.isascii() or not raw.isdigit() or len(raw) > MAX_DIGITS:
        raise ApiError(400, "bad_request", f"{name} must be an integer in {lo}..{hi}")
    value = int(raw)
    if not lo <= value <= hi:
        raise ApiError(400, "bad_request", f"{name} must be an integer in {lo}..{hi}")
    return value


def job_id_arg(raw: str) -> int:
    return int_arg("id", raw, 0, 1, MAX_ID)


def cursor_arg(raw: str | None) -> int | None:
    """The opaque cursor is the last id of the previous page: up to 19 digits. One past the
    largest possible id simply ends the listing."""
    if raw is None or raw == "":
        return None
    if not raw.isascii() or not raw.isdigit() or len(raw) > MAX_DIGITS:
        raise ApiError(400, "bad_request", "cursor must be the next_cursor of a previous page")
    return min(int(raw), MAX_ID) or None


def body_int(name: str, raw: Any, default: int, lo: int, hi: int) -> int:
    """A JSON integer (``30.0`` is one too, as JSON Schema says); null means the default."""
    if raw is None:
        return default
    if isinstance(raw, float) and raw.is_integer():
        raw = int(raw)
    if isinstance(raw, bool) or not isinstance(raw, int) or not lo <= raw <= hi:
        raise ApiError(400, "bad_request", f"{name} must be an integer in {lo}..{hi}")
    return raw


def text_arg(name: str, raw: Any, limit: int = 200) -> str | None:
    if raw is None or raw == "":
        return None
    if not isinstance(raw, str) or len(raw) > limit:
        raise ApiError(400, "bad_request", f"{name} must be a string of at most {limit} characters")
    return raw


def storable(*values: str | None) -> bool:
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


def queue_arg(raw: Any) -> str | None:
    value = text_arg("queue", raw, 64)
    if value is not None and not QUEUE_RE.match(value):
        raise ApiError(400, "bad_request", "queue must match [A-Za-z0-9_-]{1,64}")
    return value


def flag_arg(name: str, raw: str | None) -> bool:
    if raw is None or raw == "":
        return False
    if raw not in {"true", "false", "1", "0"}:
        raise ApiError(400, "bad_request", f"{name} must be true or false")
    return raw in {"true", "1"}


def order_arg(raw: str | None) -> bool:
    """``order``: newest (the default) or oldest first; True for newest."""
    if raw is None or raw == "" or raw == "newest":
        return True
    if raw != "oldest":
        raise ApiError(400, "bad_request", "order must be newest or oldest")
    return False


def status_arg(raw: Any) -> JobStatus | None:
    if raw is None or raw == "":
        return None
    try:
        return JobStatus(raw)
    except ValueError:
        allowed = ", ".join(s.value for s in JobStatus)
        raise ApiError(400, "bad_request", f"status must be one of: {allowed}") from None


async def read_body(allowed: set[str]) -> dict[str, Any]:
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
