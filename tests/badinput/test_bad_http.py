"""Bad input on the admin HTTP API, byte for byte (worker in-process on PostgreSQL, admin on
an ephemeral port, a token set).

Every endpoint of the OpenAPI document gets the generic corpus (no token, wrong tokens,
cross-origin, broken and hostile bodies, oversized bodies, wrong methods, bad path
parameters, a huge query string); hand-written cases add path traversal, SQL-looking
filters (which must match nothing), wrong content types, unicode, and malformed HTTP.

Every answer must be a clear error: a 4xx with a JSON ``{"error": {"code", "message"}}``
body (or, for requests the HTTP layer refuses before the app sees them, a bare 4xx), never a
5xx, never a leak. Afterwards nothing has changed: the same rows, no paused queue, the worker
neither draining, paused nor reloaded, and a new job still runs.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, replace
from typing import Any
from urllib.parse import quote

from gochatd.gateway.keys import hash_key
from gochatd.model import JobStatus
from gochatd.worker.service import Worker
from tests.badinput.support import RawResponse, http_request, raw_exchange
from tests.badinput.tally import tried
from tests.integration.helpers import all_jobs, make_registry, wait_for_status
from tests.support.harness import make_settings, running_worker

TOKEN = "bad-input-corpus-token"
AUTH = {"Authorization": f"Bearer {TOKEN}"}
#: A tenant's gateway key: POST /v1/jobs and /v1/jobs:batch take it instead of the token.
TENANT_KEY = "gck_bad-input-corpus-tenant-key"
TENANT_AUTH = {"Authorization": f"Bearer {TENANT_KEY}"}
MAX_BODY = 64 * 1024
#: Never in any answer: a traceback, a file's contents, driver internals.
LEAKS = (b"Traceback", b"root:x:0:0", b"from __future__", b"psycopg.", b"sqlite3.")


@dataclass
class HttpCase:
    name: str
    request: bytes
    expect: tuple[int, ...]
    code: str | None = None  # the error code, when it is known
    protocol: bool = False  # refused by the HTTP layer: the body need not be JSON
    matches_nothing: bool = False  # a 200 must list no job / retry none
    repeat: int = 1  # sent this many times (for races)


def case(name: str, method: str, target: str | bytes, expect: int | tuple[int, ...], *,
         code: str | None = None, body: bytes = b"", headers: dict[str, str | bytes] | None = None,
         auth: bool = True, matches_nothing: bool = False, proto: bool = False,
         tenant: bool = False) -> HttpCase:
    """``proto``: the HTTP layer may refuse it before the app sees it (no JSON body then).
    ``tenant``: authenticate with the tenant's gateway key rather than the admin token."""
    credentials = TENANT_AUTH if tenant else AUTH
    all_headers: dict[str, str | bytes] = {**(credentials if auth else {}), **(headers or {})}
    return HttpCase(name, http_request(method, target, headers=all_headers, body=body),
                    expect if isinstance(expect, tuple) else (expect,), code, protocol=proto,
                    matches_nothing=matches_nothing)


def protocol(name: str, raw: bytes, expect: tuple[int, ...] = (400,)) -> HttpCase:
    return HttpCase(name, raw, expect, protocol=True)


def _fill(path: str, job_id: int) -> str:
    return (path.replace("{job_id}", str(job_id)).replace("{queue}", "default")
            .replace("{batch_id}", "1"))


BAD_JOB_IDS = ["0", "-1", "abc", "9" * 30, "%D9%A3", "%EF%BC%93", "1%00", "1.0", "%201",
               "..%2F..%2Fetc%2Fpasswd", "1e3", "0x1", "9223372036854775808", "99999999"]
BAD_QUEUES = ["a%20b", "q" * 65, "%E2%80%8B", "high%0A", "%00", "default'--", "d%C3%A9faut",
              "..%2F..", "no_such_queue_anywhere"]


def generated_cases(document: dict[str, Any], job_id: int) -> list[HttpCase]:
    """The corpus every endpoint of the OpenAPI document gets."""
    out: list[HttpCase] = []
    for path, operations in document["paths"].items():
        target = _fill(path, job_id)
        for method in operations:
            tag = f"{method.upper()} {path}"
            # The gateway's POSTs take a tenant key where the others take the admin token.
            tenant = operations[method].get("security") == [{"tenantKey": []}]

            def pcase(*args: Any, tenant: bool = tenant, **kwargs: Any) -> HttpCase:
                return case(*args, tenant=tenant, **kwargs)

            if method == "post":
                out += [
                    pcase(f"{tag}: no token", "POST", target, 401, code="unauthorized", auth=False),
                    pcase(f"{tag}: wrong token", "POST", target, 401, code="unauthorized",
                          auth=False, headers={"Authorization": "Bearer wrong"}),
                    pcase(f"{tag}: token plus junk", "POST", target, 401, auth=False,
                          headers={"Authorization": f"Bearer {TOKEN}x"}),
                    pcase(f"{tag}: basic auth", "POST", target, 401, auth=False,
                          headers={"Authorization": "Basic YWRtaW46YWRtaW4="}),
                    pcase(f"{tag}: scheme only", "POST", target, 401, auth=False,
                          headers={"Authorization": "Bearer"}),
                    pcase(f"{tag}: 8 KB token", "POST", target, 401, auth=False,
                          headers={"Authorization": "Bearer " + "t" * 8000}),
                    pcase(f"{tag}: non-ASCII token", "POST", target, 401, auth=False,
                          headers={"Authorization": b"Bearer \xff\xfe" + TOKEN.encode()}),
                    # The gateway's routes take no query: refused as such (400) before the
                    # key is looked at (admin/http.py reject_unknown_query); the rest: 401.
                    pcase(f"{tag}: token in the query", "POST", f"{target}?token={TOKEN}",
                          400 if tenant else 401, auth=False),
                    pcase(f"{tag}: cross-origin", "POST", target, 403, code="cross_origin",
                          headers={"Origin": "http://evil.example"}),
                    pcase(f"{tag}: broken JSON", "POST", target, 400, body=b"{"),
                    pcase(f"{tag}: single quotes", "POST", target, 400, body=b"{'a': 1}"),
                    pcase(f"{tag}: JSON array", "POST", target, 400, body=b"[1]"),
                    pcase(f"{tag}: JSON null", "POST", target, 400, body=b"null"),
                    pcase(f"{tag}: JSON NaN", "POST", target, 400, body=b"NaN"),
                    pcase(f"{tag}: unknown field", "POST", target, 400,
                          body=b'{"zzz_unknown": 1}'),
                    pcase(f"{tag}: invalid UTF-8", "POST", target, 400, body=b'{"\xff\xfe": 1}'),
                    pcase(f"{tag}: 20000 deep", "POST", target, 400, body=b"[" * 20000),
                    pcase(f"{tag}: 5000-digit number", "POST", target, 400,
                          body=b'{"n": ' + b"7" * 5000 + b"}"),
                    pcase(f"{tag}: XML", "POST", target, 400, body=b"<a/>",
                          headers={"Content-Type": "text/xml"}),
                    pcase(f"{tag}: form", "POST", target, 400, body=b"queue=default",
                          headers={"Content-Type": "application/x-www-form-urlencoded"}),
                    pcase(f"{tag}: over the body limit", "POST", target, 413,
                          code="request_entity_too_large", body=b" " * (MAX_BODY + 1)),
                    pcase(f"{tag}: chunked over the limit", "POST", target, 413,
                          headers={"Transfer-Encoding": "chunked"},
                          body=b"%x\r\n%s\r\n0\r\n\r\n" % (MAX_BODY + 10, b"[" * (MAX_BODY + 10))),
                    pcase(f"{tag}: announced 100 GB", "POST", target, 413,
                          headers={"Content-Length": "100000000000"}),
                ]
                if "get" not in operations:
                    out.append(case(f"{tag}: GET", "GET", target, 405, code="method_not_allowed"))
            else:
                out += [
                    case(f"{tag}: {verb}", verb, target, 405, code="method_not_allowed")
                    for verb in ("PUT", "DELETE", "PATCH") if verb.lower() not in operations
                ]
                out.append(case(f"{tag}: POST without a token", "POST", target, (401, 405),
                                auth=False))
                out.append(case(f"{tag}: 8 KB query", "GET", f"{target}?junk={'j' * 8000}",
                                (200, 400)))
            if "{job_id}" in path:
                for bad in BAD_JOB_IDS:
                    out.append(case(f"{tag}: job id {bad[:20]}", method.upper(),
                                    path.replace("{job_id}", bad).replace("{queue}", "default"),
                                    (400, 404)))
            if "{batch_id}" in path:
                for bad in BAD_JOB_IDS:
                    out.append(case(f"{tag}: batch id {bad[:20]}", method.upper(),
                                    path.replace("{batch_id}", bad), (400, 404)))
            if "{queue}" in path:
                for bad in BAD_QUEUES:
                    out.append(case(f"{tag}: queue {bad[:20]}", method.upper(),
                                    path.replace("{queue}", bad), (400, 404)))
    return out


SQLISH = ["' OR '1'='1", "x'; DROP TABLE background_jobs; --", "%", "*", "sys:noop' --",
          "\\", "1) OR (1=1", "$ne", '{"$gt": ""}', "default\x00", "\U0001f4a9\u202e",
          "\u0000", "\ud800"]


def hand_written(ids: dict[str, int]) -> list[HttpCase]:
    out = [
        # path traversal
        case("traversal: raw dot-dot", "GET", "/../../etc/passwd", (400, 404)),
        case("traversal: static dot-dot", "GET", "/static/../../../../etc/passwd", (400, 404)),
        case("traversal: static to source", "GET", "/static/../app.py", (400, 404)),
        case("traversal: static encoded", "GET", "/static/..%2fapp.py", (400, 404)),
        case("traversal: double encoded", "GET", "/static/%252e%252e/app.py", (400, 404)),
        case("traversal: encoded dots", "GET", "/%2e%2e/%2e%2e/etc/passwd", (400, 404)),
        case("traversal: backslashes", "GET", "/static/..\\..\\app.py", (400, 404)),
        # werkzeug merges the slashes with a redirect to /static/etc/passwd (a 404).
        case("traversal: absolute in static", "GET", "/static//etc/passwd", (308, 400, 404)),
        case("traversal: in a job id", "GET", "/v1/jobs/..%2f..%2f..%2fetc%2fpasswd", (400, 404)),
        case("traversal: api dot-dot", "GET", "/v1/../../etc/passwd", (400, 404)),
        case("traversal: NUL in path", "GET", "/static/index.html%00.py", (400, 404)),
        # filters that look like SQL: 200 and nothing, or 400
        *[case(f"filter {name}: {v[:30]!r}", "GET",
               f"/v1/jobs?{name}={quote(v, safe='', errors='surrogatepass')}", (200, 400),
               matches_nothing=True)
          for name in ("job_type", "tenant") for v in SQLISH],
        case("filter queue: SQL", "GET", "/v1/jobs?queue=" + quote("default' OR '1'='1"), 400),
        case("filter queue: trailing newline", "GET", "/v1/jobs?queue=default%0A", 400),
        case("filter status: SQL", "GET", "/v1/jobs?status=" + quote("queued' OR '1'='1"), 400),
        case("filter status: zero-width", "GET", "/v1/jobs?status=%E2%80%8Bqueued", 400),
        case("filter limit: SQL", "GET", "/v1/jobs?limit=" + quote("1; DELETE FROM background_jobs"),
             400),
        case("filter limit: zero", "GET", "/v1/jobs?limit=0", 400),
        case("filter limit: huge", "GET", "/v1/jobs?limit=" + "9" * 40, 400),
        case("filter limit: arabic-indic", "GET", "/v1/jobs?limit=%D9%A3", 400),
        case("filter cursor: SQL", "GET", "/v1/jobs?cursor=" + quote("1 OR 1=1"), 400),
        case("filter cursor: negative", "GET", "/v1/jobs?cursor=-1", 400),
        case("filter tenant: 8 KB", "GET", "/v1/jobs?tenant=" + "x" * 8000, 400),
        case("filter tenant: invalid UTF-8", "GET", "/v1/jobs?tenant=%FF%FE", (200, 400),
             matches_nothing=True),
        *[case(f"bulk retry {name}: {v[:20]!r}", "POST", "/v1/jobs/retry", (200, 400),
               body=f'{{"{name}": "{v}"}}'.encode("utf-8", "surrogatepass"),
               matches_nothing=True)
          for name in ("job_type", "tenant") for v in ("' OR 1=1 --", "x' OR 'a'='a", "\\u0000",
                                                       "\\ud800", "%")],
        case("bulk retry queue: SQL", "POST", "/v1/jobs/retry", 400,
             body=b'{"queue": "default; DROP TABLE x"}'),
        case("bulk retry queue: number", "POST", "/v1/jobs/retry", 400, body=b'{"queue": 5}'),
        case("bulk retry tenant: list", "POST", "/v1/jobs/retry", 400, body=b'{"tenant": ["a"]}'),
        case("bulk retry job_type: operator", "POST", "/v1/jobs/retry", 400,
             body=b'{"job_type": {"$ne": 1}}'),
        case("bulk retry limit: NaN", "POST", "/v1/jobs/retry", 400, body=b'{"limit": NaN}'),
        case("bulk retry limit: 1e999", "POST", "/v1/jobs/retry", 400, body=b'{"limit": 1e999}'),
        case("bulk retry limit: true", "POST", "/v1/jobs/retry", 400, body=b'{"limit": true}'),
        case("bulk retry limit: string", "POST", "/v1/jobs/retry", (200, 400),
             body=b'{"limit": "5", "job_type": "nothing:matches"}', matches_nothing=True),
        case("bulk retry limit: 0", "POST", "/v1/jobs/retry", 400, body=b'{"limit": 0}'),
        case("bulk retry limit: 10001", "POST", "/v1/jobs/retry", 400, body=b'{"limit": 10001}'),
        case("bulk retry limit: fraction", "POST", "/v1/jobs/retry", 400, body=b'{"limit": 2.5}'),
        case("bulk retry: unknown field too", "POST", "/v1/jobs/retry", 400,
             body=b'{"queue": "default", "colour": "red"}'),
        case("bulk retry: JSON with text/plain", "POST", "/v1/jobs/retry", (200, 400, 415),
             body=b'{"job_type": "nothing:matches"}', headers={"Content-Type": "text/plain"},
             matches_nothing=True),
        case("bulk retry: JSON declared latin-1", "POST", "/v1/jobs/retry", 400,
             body=b'{"tenant": "caf\xe9"}',
             headers={"Content-Type": "application/json; charset=latin-1"}),
        case("bulk retry: multipart", "POST", "/v1/jobs/retry", 400,
             headers={"Content-Type": "multipart/form-data; boundary=x"},
             body=b'--x\r\nContent-Disposition: form-data; name="queue"\r\n\r\ndefault\r\n--x--\r\n'),
        case("bulk retry: trailing garbage", "POST", "/v1/jobs/retry", 400, body=b"{}garbage"),
        case("bulk retry: two objects", "POST", "/v1/jobs/retry", 400, body=b"{}{}"),
        # query flags
        case("drain exit=maybe", "POST", "/v1/drain?exit=maybe", 400),
        case("drain exit=yes", "POST", "/v1/drain?exit=yes", 400),
        case("drain exit empty", "POST", "/v1/drain?exit=", 400),
        case("drain exit unicode", "POST", "/v1/drain?exit=tr%C3%BCe", 400),
        case("drain body exit", "POST", "/v1/drain", 400, body=b'{"exit": true}'),
        case("queue pause body", "POST", "/v1/queues/default/pause", 400, body=b'{"queue": "x"}'),
        # the wrong state (rows must not move)
        case("retry a completed job", "POST", f"/v1/jobs/{ids['canary']}/retry", 409,
             code="invalid_transition"),
        case("cancel a completed job", "POST", f"/v1/jobs/{ids['canary']}/cancel", 409,
             code="invalid_transition"),
        case("cancel a dead job", "POST", f"/v1/jobs/{ids['dead']}/cancel", 409),
        case("retry a queued job", "POST", f"/v1/jobs/{ids['delayed']}/retry", 409),
        case("cancel a cancelled job", "POST", f"/v1/jobs/{ids['cancelled']}/cancel", 409),
        case("retry a dead job without a token", "POST", f"/v1/jobs/{ids['dead']}/retry", 401,
             auth=False),
        # methods
        case("TRACE /", "TRACE", "/", (401, 405)),
        case("made-up method", "FROB", "/healthz", (401, 405)),
        case("PUT a job", "PUT", f"/v1/jobs/{ids['dead']}", 405),
        case("GET bulk retry", "GET", "/v1/jobs/retry", 405),
        case("unknown endpoint", "GET", "/v1/jobs/1/explode", 404),
        case("unknown version", "GET", "/v2/jobs", 404),
        # unicode in the path
        case("emoji path", "GET", "/v1/%F0%9F%92%A9", 404),
        case("raw UTF-8 path", "GET", "/v1/jöbs".encode(), (400, 404), proto=True),
        case("raw invalid UTF-8 path", "GET", b"/v1/jobs/\xff\xfe", (400, 404), proto=True),
        case("RTL override in path", "GET", "/v1/jobs/%E2%80%AE1", 400),
    ]
    out += [
        protocol("query string of 100 KB", http_request("GET", "/v1/jobs?tenant=" + "x" * 100_000),
                 (400, 414, 431)),
        protocol("5000 query parameters",
                 http_request("GET", "/v1/jobs?" + "a=1&" * 5000, headers=AUTH),
                 (200, 400, 414, 431)),
        protocol("5000 query parameters, no token",
                 http_request("GET", "/v1/jobs?" + "a=1&" * 5000), (401, 400, 414, 431)),
        protocol("not HTTP", b"GARBAGE\r\n\r\n"),
        # Framing errors go to /v1/drain without a token: however the HTTP layer resolves
        # them, the drain must not happen (401 if it lets the request through).
        protocol("negative content length",
                 http_request("POST", "/v1/drain", headers={"Content-Length": "-5"}), (400, 401)),
        protocol("content length word",
                 http_request("POST", "/v1/drain", headers={"Content-Length": "ten"}), (400, 401)),
        protocol("length and chunked",
                 http_request("POST", "/v1/drain", body=b"0\r\n\r\n",
                              headers={"Content-Length": "5", "Transfer-Encoding": "chunked"}),
                 (400, 401)),
        # The app answers 401 while the HTTP layer trips over the body: this once raced into
        # an exception that stopped the whole daemon (about one time in four).
        replace(protocol("bad chunk size",
                         http_request("POST", "/v1/drain", body=b"zz\r\n{}\r\n0\r\n\r\n",
                                      headers={"Transfer-Encoding": "chunked"}), (400, 401)),
                repeat=60),
        protocol("NUL in a header", http_request("GET", "/healthz", headers={"X-Junk": b"a\x00b"})),
        protocol("header without a colon", b"GET /healthz HTTP/1.1\r\nHost: x\r\nJunk\r\n\r\n"),
        protocol("space before the colon", b"GET /healthz HTTP/1.1\r\nHost : x\r\n\r\n"),
        protocol("no Host", b"GET /healthz HTTP/1.1\r\nConnection: close\r\n\r\n"),
        protocol("header block of 100 KB",
                 http_request("GET", "/healthz", headers={"X-Big": "b" * 100_000}), (400, 431)),
        protocol("two content lengths",
                 http_request("POST", "/v1/drain", body=b"{}",
                              headers={"Content-Length": "2, 3"}), (400, 401)),
    ]
    return out


def gateway_cases(ids: dict[str, int]) -> list[HttpCase]:
    """POST /v1/jobs and /v1/jobs:batch: keys, tenants, bodies. Nothing may be written."""
    def job(**fields: Any) -> dict[str, Any]:
        return {"job_type": "sys:noop", "payload": {}, **fields}

    def post(name: str, path: str, body: Any, expect: int | tuple[int, ...] = 400, *,
             code: str | None = None, headers: dict[str, str | bytes] | None = None,
             raw: bytes | None = None, auth: bool = True) -> HttpCase:
        data = raw if raw is not None else json.dumps(body).encode()
        return case(f"gateway {name}", "POST", path, expect, code=code, body=data,
                    headers={"Content-Type": "application/json", **(headers or {})},
                    auth=auth, tenant=True)

    one, many = "/v1/jobs", "/v1/jobs:batch"
    return [
        # keys: the admin token is no tenant key; a key's hash is no key
        post("admin token as key", one, job(), 401, code="unauthorized", auth=False,
             headers=AUTH),
        post("hash as key", one, job(), 401, code="unauthorized", auth=False,
             headers={"Authorization": f"Bearer {hash_key(TENANT_KEY)}"}),
        post("key with a trailing byte", one, job(), 401, auth=False,
             headers={"Authorization": f"Bearer {TENANT_KEY}\x01"}),
        post("key of another case", one, job(), 401, auth=False,
             headers={"Authorization": f"Bearer {TENANT_KEY.upper()}"}),
        # the tenant is the key's, never the body's
        post("tenant_id in the body", one, job(tenant_id="other")),
        post("tenant_id null", one, job(tenant_id=None)),
        post("tenant_id in a batch item", many, {"jobs": [job(), job(tenant_id="other")]}),
        post("tenant_id beside jobs", many, {"jobs": [job()], "tenant_id": "other"}),
        # types
        *[post(f"{field} {value!r}"[:60], one, job(**{field: value})) for field, value in (
            ("job_type", 5), ("job_type", ""), ("job_type", "a b"), ("job_type", "x" * 201),
            ("payload", [1]), ("payload", "text"), ("payload", 5), ("payload", {"a": "\u0000"}),
            ("queue", 5), ("queue", ""), ("queue", "a b"), ("queue", ["high"]),
            ("delay_s", "5"), ("delay_s", -1), ("delay_s", True), ("delay_s", 1e12),
            ("scheduled_at", "tomorrow"), ("scheduled_at", "2026-01-01T00:00:00"),
            ("scheduled_at", 1767225600), ("scheduled_at", "0001-01-01T00:00:00+05:00"),
            ("max_attempts", 0), ("max_attempts", 1001), ("max_attempts", "3"),
            ("max_attempts", 2.5), ("priority", True), ("priority", 1001),
            ("unique_for_s", -1), ("unique_for_s", 1e12), ("unique_for_s", "60"),
            ("unique_for_s", True), ("unique_key", "k" * 513), ("unique_key", ""),
            ("unique_key", "a\u0000b"), ("unique_key", 5),
            ("traceparent", "00-xyz"), ("traceparent", 7),
        )],
        post("job_type missing", one, {"payload": {}}),
        post("both delay_s and scheduled_at", one,
             job(delay_s=5, scheduled_at="2030-01-01T00:00:00Z")),
        post("payload over the limit", one, None, (400, 413),
             raw=b'{"job_type": "sys:noop", "payload": {"a": "' + b"x" * MAX_BODY + b'"}}'),
        post("NaN delay", one, None, raw=b'{"job_type": "sys:noop", "delay_s": NaN}'),
        post("400-digit delay", one, None,
             raw=b'{"job_type": "sys:noop", "delay_s": 1' + b"0" * 400 + b"}"),
        post("400-digit priority", one, None,
             raw=b'{"job_type": "sys:noop", "priority": 1' + b"0" * 400 + b"}"),
        post("1e400 max_attempts", one, None,
             raw=b'{"job_type": "sys:noop", "max_attempts": 1e400}'),
        post("duplicate keys", one, None, raw=b'{"job_type": "sys:noop", "job_type": 5}'),
        # Idempotency-Key
        post("empty Idempotency-Key", one, job(), headers={"Idempotency-Key": ""}),
        post("long Idempotency-Key", one, job(), headers={"Idempotency-Key": "k" * 513}),
        post("tab in Idempotency-Key", one, job(), headers={"Idempotency-Key": "a\tb"}),
        post("non-ASCII Idempotency-Key", one, job(), headers={"Idempotency-Key": b"\xff\xfe"}),
        # batches
        post("batch of 1001", many, {"jobs": [job()] * 1001}),
        post("empty batch", many, {"jobs": []}),
        post("batch not a list", many, {"jobs": job()}),
        post("batch as a bare list", many, [job()]),
        post("batch with one bad item", many, {"jobs": [job(), job(), job(queue="no spaces")]}),
        post("batch item not an object", many, {"jobs": [job(), "job"]}),
        post("batch key with NUL", many, {"jobs": [job(idempotency_key="a\u0000b")]}),
        post("batch key too long", many, {"jobs": [job(idempotency_key="k" * 513)]}),
        post("batch key a number", many, {"jobs": [job(idempotency_key=5)]}),
        # dependencies, chains, batches (docs/workflows.md): refused before anything is written
        *[post(f"depends_on {value!r}"[:60], one, job(depends_on=value)) for value in (
            "1", 1, {"id": 1}, [0], [-1], [True], ["1"], [1.5], [2**63], [None],
            list(range(1, 1002)))],
        post("run_if_failed a string", one, job(run_if_failed="yes")),
        post("run_if_failed a number", one, job(run_if_failed=1)),
        *[post(f"depends_on with {field}", one, job(depends_on=[ids["delayed"]], **{field: v}))
          for field, v in (("delay_s", 0), ("scheduled_at", "2030-01-01T00:00:00Z"),
                           ("unique_for_s", 60), ("unique_key", "k"))],
        post("depends_on another tenant's job", one, job(depends_on=[ids["delayed"]]), 404,
             code="dependency_not_found"),
        post("depends_on a missing job", one, job(depends_on=[424242]), 404,
             code="dependency_not_found"),
        post("empty chain", "/v1/chains", {"jobs": []}),
        post("chain not a list", "/v1/chains", {"jobs": job()}),
        post("chain of 1001", "/v1/chains", {"jobs": [job()] * 1001}),
        post("chain link with delay", "/v1/chains", {"jobs": [job(), job(delay_s=1)]}),
        post("chain link with a key", "/v1/chains", {"jobs": [job(idempotency_key="k")]}),
        post("chain link with tenant_id", "/v1/chains", {"jobs": [job(tenant_id="other")]}),
        post("chain link depends_on", "/v1/chains", {"jobs": [job(depends_on=[1])]}),
        post("chain with Idempotency-Key", "/v1/chains", {"jobs": [job()]},
             headers={"Idempotency-Key": "c-1"}),
        post("batch of 999 members", "/v1/batches", {"jobs": [job()] * 999}),
        post("batch without jobs", "/v1/batches", {"on_success": job()}),
        post("batch callback a list", "/v1/batches", {"jobs": [job()], "on_success": [job()]}),
        post("batch callback delayed", "/v1/batches",
             {"jobs": [job()], "on_complete": job(scheduled_at="2030-01-01T00:00:00Z")}),
        post("batch member with tenant_id", "/v1/batches", {"jobs": [job(tenant_id="x")]}),
        post("batch member depends_on", "/v1/batches", {"jobs": [job(depends_on=[1])]}),
        post("batch member unique", "/v1/batches", {"jobs": [job(unique_key="u")]}),
        post("batch with Idempotency-Key", "/v1/batches", {"jobs": [job()]},
             headers={"Idempotency-Key": "b-1"}),
        case("gateway GET batches", "GET", "/v1/batches", 403, code="tenant_key", tenant=True),
        # methods
        # A tenant key opens nothing but the gateway's POSTs: refused before routing.
        case("gateway GET batch", "GET", many, 403, code="tenant_key", tenant=True),
        case("gateway PUT one", "PUT", one, 403, code="tenant_key", tenant=True),
    ]


def check(case_: HttpCase, response: RawResponse) -> str | None:
    """None when the answer keeps the contract; what is wrong otherwise."""
    where = f"{case_.name}: {response.status} {response.body[:300]!r}"
    if any(leak in response.body for leak in LEAKS):
        return f"leak in {where}"
    if response.status >= 500:
        return f"server error in {where}"
    if response.status not in case_.expect:
        return f"expected {case_.expect} in {where}"
    if case_.protocol or response.status < 400:
        if case_.matches_nothing and response.status == 200:
            data = response.json()
            if data.get("jobs", []) != [] or data.get("retried", 0) != 0:
                return f"matched something in {where}"
        return None
    if not response.content_type.startswith("application/json"):
        return f"not JSON in {where}"
    try:
        error = response.json()["error"]
        assert isinstance(error["code"], str) and isinstance(error["message"], str)
    except (ValueError, KeyError, TypeError, AssertionError):
        return f"not an error object in {where}"
    if case_.code is not None and error["code"] != case_.code:
        return f"code {error['code']!r}, expected {case_.code!r} in {where}"
    return None


def _state(worker: Worker) -> dict[str, Any]:
    status = worker.control.status()
    return {k: status[k] for k in ("draining", "exit_when_drained", "paused", "stopping",
                                   "paused_queues", "pending_restart", "config_reloaded_at",
                                   "queues", "concurrency")}


async def test_malformed_http_requests(pg_clean: str) -> None:
    settings = make_settings(pg_clean, admin_listen="127.0.0.1:0", admin_token=TOKEN,
                             admin_max_body_bytes=MAX_BODY,
                             gateway_keys={hash_key(TENANT_KEY): "badinput"})
    async with running_worker(settings, registry=make_registry()) as worker:
        assert worker.admin_address is not None
        host, _, port_text = worker.admin_address.split("://")[-1].rpartition(":")
        port = int(port_text)
        store, client = worker.store, worker.client
        canary = await client.enqueue("sys:noop", {"canary": "before"})
        dead = await client.enqueue("sys:fail", {"retryable": False})
        delayed = await client.enqueue("sys:noop", {}, delay_s=3600)
        cancelled = await client.enqueue("sys:noop", {}, delay_s=3600)
        await store.cancel_job(cancelled.id)
        await wait_for_status(store, canary.id, JobStatus.COMPLETED)
        await wait_for_status(store, dead.id, JobStatus.DEAD)
        ids = {"canary": canary.id, "dead": dead.id, "delayed": delayed.id,
               "cancelled": cancelled.id}
        rows_before = [j.to_dict() for j in await all_jobs(store)]
        state_before = _state(worker)
        paused_before = await store.paused_queues()

        document = (await raw_exchange(
            host, port, http_request("GET", "/v1/openapi.json", headers=AUTH))).json()
        cases = generated_cases(document, canary.id) + hand_written(ids) + gateway_cases(ids)
        problems: list[str] = []
        for c in cases:
            for _ in range(c.repeat):
                response = await raw_exchange(host, port, c.request)
                problem = check(c, response)
                if problem:
                    problems.append(problem)
                    break
        tried("http", sum(c.repeat for c in cases))

        healthz = await raw_exchange(host, port, http_request("GET", "/healthz"))
        rows_after = [j.to_dict() for j in await all_jobs(store)]
        state_after = _state(worker)
        paused_after = await store.paused_queues()
        assert not problems, f"{len(problems)} of {len(cases)} requests broke the contract:\n" + \
            "\n".join(problems)
        assert healthz.status == 200
        assert rows_after == rows_before
        assert state_after == state_before
        assert paused_after == paused_before == set()
        canary_after = await client.enqueue("sys:noop", {"canary": "after"})
        await wait_for_status(store, canary_after.id, JobStatus.COMPLETED)
