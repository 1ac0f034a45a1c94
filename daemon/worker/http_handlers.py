"""HTTP job handlers: job types with no Python handler, run by an HTTP endpoint.

Config ``handlers.http`` maps a job type, or a ``prefix:*`` pattern, to
``{url, timeout_s, secret_env}``. An exact job type beats a pattern; among patterns the
longest prefix wins. gochatd POSTs ``{id, job_type, queue, tenant_id, attempt, fence,
payload}`` as JSON, signed like the outbox webhook (``X-Gochatd-Signature``, see
``gochatd.signing``) when ``secret_env`` names a secret. The answer decides the outcome:

    2xx                       completed; {"replies": [{channel, to, body, dedupe_key}]} in
                              the answer go to the outbox with the completion (ctx.reply)
    408, 409, 429, 5xx        retried (Retry-After honoured, within worker.retry_cap_s)
    timeout, connection error retried
    any other status          dead

Only the status reaches the job's error columns (``http_503``, ``http_timeout``): never the
answer's body, the URL or the secret.
"""

from __future__ import annotations

import json
import os
import re
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

import httpx
import trio

from gochatd.config.fields import mapping_value
from gochatd.context import JobContext
from gochatd.errors import ConfigError, HandlerFailure
from gochatd.obs import otel
from gochatd.retry import parse_retry_after
from gochatd.signing import SIGNATURE_HEADER, sign
from gochatd.worker.registry import JOB_TYPE_RE, Handler, HandlerSpec

_ENV_NAME = re.compile(r"^[A-Za-z_][A-Za-z0-9_]{0,127}\Z")
_KEYS = frozenset({"url", "timeout_s", "secret_env"})
DEFAULT_TIMEOUT_S = 30.0
#: The runner's own timeout for an HTTP job is the request's plus this, so the request's
#: finer-grained timeout (error_class http_timeout) normally fires first.
RUNNER_MARGIN_S = 1.0
#: Answers larger than this are not read (a 2xx then makes the job dead: its replies are lost).
MAX_RESPONSE_BYTES = 4 << 20
RETRYABLE_4XX = frozenset({408, 409, 429})


# -- config ----------------------------------------------------------------------------------


def _pattern_ok(pattern: str) -> bool:
    if pattern.endswith(":*"):
        pattern = pattern[:-2]
    return bool(JOB_TYPE_RE.match(pattern)) and "*" not in pattern and len(pattern) <= 200


def parse_http_handlers(raw: Any) -> dict[str, dict[str, Any]]:
    """Validate ``handlers.http``; the environment variable holds the same as YAML/JSON.
    Returns plain mappings ``{pattern: {url, timeout_s, secret_env}}``."""
    raw = mapping_value(raw, "a mapping of job type or 'prefix:*' -> {url, timeout_s, secret_env}")
    out: dict[str, dict[str, Any]] = {}
    for pattern, entry in raw.items():
        if not isinstance(pattern, str) or not _pattern_ok(pattern):
            raise ValueError(f"{str(pattern)[:60]!r} is not a job type or 'prefix:*'")
        if not isinstance(entry, Mapping):
            raise ValueError(f"{pattern}: expected a mapping such as {{url: http://host/jobs}}")
        unknown = sorted(str(k) for k in set(entry) - _KEYS)
        if unknown:
            raise ValueError(f"{pattern}: unknown key {unknown[0]!r} (allowed: secret_env, "
                             "timeout_s, url)")
        url = entry.get("url")
        if not isinstance(url, str) or not url.startswith(("http://", "https://")):
            raise ValueError(f"{pattern}: url: expected an http:// or https:// URL")
        try:
            httpx.URL(url)
        except (httpx.InvalidURL, ValueError):
            raise ValueError(f"{pattern}: url: not a valid URL") from None
        timeout = entry.get("timeout_s", DEFAULT_TIMEOUT_S)
        if isinstance(timeout, bool) or not isinstance(timeout, int | float) or not (
            0.1 <= float(timeout) <= 3600
        ):
            raise ValueError(f"{pattern}: timeout_s: expected a number in 0.1..3600")
        secret_env = entry.get("secret_env") or ""
        if not isinstance(secret_env, str) or (secret_env and not _ENV_NAME.match(secret_env)):
            raise ValueError(f"{pattern}: secret_env: expected an environment variable name")
        out[pattern] = {"url": url, "timeout_s": float(timeout), "secret_env": secret_env}
    return out


# -- the route table -------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class HttpRoute:
    pattern: str
    url: str
    timeout_s: float
    secret: bytes | None

    def __repr__(self) -> str:  # never the secret
        return f"HttpRoute({self.pattern!r}, timeout_s={self.timeout_s})"


def match_route(routes: Mapping[str, HttpRoute], job_type: str) -> HttpRoute | None:
    """The exact job type, else the ``prefix:*`` with the longest prefix."""
    exact = routes.get(job_type)
    if exact is not None:
        return exact
    best: HttpRoute | None = None
    for pattern, route in routes.items():
        if pattern.endswith(":*") and job_type.startswith(pattern[:-1]) and (
            best is None or len(pattern) > len(best.pattern)
        ):
            best = route
    return best


class HttpHandlers:
    """The worker's HTTP handlers and their one shared ``httpx.AsyncClient``."""

    def __init__(self, config: Mapping[str, Mapping[str, Any]],
                 environ: Mapping[str, str] | None = None) -> None:
        env = os.environ if environ is None else environ
        self.routes: dict[str, HttpRoute] = {}
        for pattern, entry in config.items():
            secret: bytes | None = None
            if entry.get("secret_env"):
                value = env.get(entry["secret_env"], "")
                if not value:
                    raise ConfigError(f"handlers.http {pattern}: secret_env "
                                      f"{entry['secret_env']} is not set or empty")
                secret = value.encode("utf-8")
            self.routes[pattern] = HttpRoute(pattern, entry["url"], float(entry["timeout_s"]), secret)
        self._specs: dict[str, HandlerSpec] = {}
        self._client: httpx.AsyncClient | None = None

    def __bool__(self) -> bool:
        return bool(self.routes)

    async def open(self) -> None:
        # Redirects are not followed: a handler URL that redirects is a configuration error,
        # and following it would re-send a signed body to another place.
        self._client = httpx.AsyncClient(follow_redirects=False, trust_env=False)

    async def aclose(self) -> None:
        client, self._client = self._client, None
        if client is not None:
            with trio.CancelScope(shield=True), trio.move_on_after(5):
                await client.aclose()

    def resolve(self, job_type: str) -> HandlerSpec | None:
        """The runner's fallback for job types without a Python handler."""
        route = match_route(self.routes, job_type)
        if route is None:
            return None
        spec = self._specs.get(route.pattern)
        if spec is None:
            spec = HandlerSpec(route.pattern, self._handler(route), "default",
                               timeout_s=route.timeout_s + RUNNER_MARGIN_S)
            self._specs[route.pattern] = spec
        return spec

    def _handler(self, route: HttpRoute) -> Handler:
        async def run(ctx: JobContext) -> None:
            await self.call(route, ctx)

        return run

    async def call(self, route: HttpRoute, ctx: JobContext) -> None:
        client = self._client
        if client is None:
            raise HandlerFailure("http_not_started", "the HTTP client is not open")
        body = json.dumps(
            {"id": ctx.job_id, "job_type": ctx.job_type, "queue": ctx.queue,
             "tenant_id": ctx.tenant_id, "attempt": ctx.attempt, "fence": ctx.fence,
             "payload": ctx.payload},
            separators=(",", ":"), ensure_ascii=False,
        ).encode("utf-8")
        headers = {"Content-Type": "application/json", "User-Agent": "gochatd"}
        if route.secret is not None:
            headers[SIGNATURE_HEADER] = sign(route.secret, body)
        spans = otel.SPANS
        if spans is None:
            if ctx.traceparent:
                headers["traceparent"] = ctx.traceparent
            status, retry_after, answer = await self._post(client, route, body, headers)
        else:  # a client span, whose context goes downstream
            status, retry_after, answer = await spans.http_call(
                route.url, headers, ctx.traceparent, lambda: self._post(client, route, body, headers))
        ctx.log.info("http_handler_answered", status=status)
        if 200 <= status < 300:
            for reply in _replies(answer, status):
                await ctx.reply(channel=reply["channel"], to=reply["to"], body=reply["body"],
                                dedupe_key=reply["dedupe_key"])
            return
        retryable = status in RETRYABLE_4XX or status >= 500
        raise HandlerFailure(f"http_{status}", f"the HTTP handler answered {status}",
                             retryable=retryable, retry_after_s=retry_after if retryable else None)

    async def _post(
        self, client: httpx.AsyncClient, route: HttpRoute, body: bytes, headers: dict[str, str]
    ) -> tuple[int, float | None, bytes | None]:
        """(status, Retry-After seconds, the body of a 2xx answer or None if too large)."""
        try:
            with trio.fail_after(route.timeout_s):
                async with client.stream("POST", route.url, content=body, headers=headers,
                                         timeout=route.timeout_s) as response:
                    retry_after = parse_retry_after(response.headers.get("retry-after"))
                    if not 200 <= response.status_code < 300:
                        return response.status_code, retry_after, b""
                    chunks: list[bytes] = []
                    size = 0
                    async for chunk in response.aiter_bytes():
                        size += len(chunk)
                        if size > MAX_RESPONSE_BYTES:
                            return response.status_code, None, None
                        chunks.append(chunk)
                    return response.status_code, retry_after, b"".join(chunks)
        except (trio.TooSlowError, httpx.TimeoutException):
            raise HandlerFailure("http_timeout",
                                 f"the HTTP handler did not answer within {route.timeout_s}s") from None
        except httpx.TransportError as exc:
            # The exception text may name the host; the class says enough.
            raise HandlerFailure("http_connect_error",
                                 f"the HTTP handler could not be reached ({type(exc).__name__})"
                                 ) from None


def _replies(answer: bytes | None, status: int) -> list[dict[str, Any]]:
    """The replies of a 2xx answer. An answer without JSON or without ``replies`` has none;
    a malformed ``replies`` makes the job dead (running it again would redo its work)."""
    if answer is None:
        raise HandlerFailure("http_response_too_large",
                             f"the HTTP handler's {status} answer is over {MAX_RESPONSE_BYTES} bytes",
                             retryable=False)
    if not answer.strip():
        return []
    try:
        doc = json.loads(answer)
    except (ValueError, RecursionError):
        return []
    if not isinstance(doc, dict) or doc.get("replies") is None:
        return []
    replies = doc["replies"]
    ok = isinstance(replies, list) and all(
        isinstance(r, dict) and isinstance(r.get("channel"), str) and isinstance(r.get("to"), str)
        and isinstance(r.get("body"), dict) and isinstance(r.get("dedupe_key"), str)
        for r in replies
    )
    if not ok:
        raise HandlerFailure("http_bad_replies", "the HTTP handler's 'replies' must be a list "
                             "of {channel, to, body (object), dedupe_key}", retryable=False)
    return list(replies)


