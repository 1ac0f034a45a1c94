"""Bad requests get a 4xx with a JSON error, never a 500: malformed bodies, unknown queues,
bad ids, bad filters, path traversal, SQL-looking strings (they match nothing), oversized
bodies and wrong methods. Nothing a bad request says changes any state."""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import Any

from tests.admin.helpers import (
    PARKED,
    Admin,
    Stack,
    admin_worker,
    assert_json_error,
    raw_http,
    raw_request,
)

MAX_BODY = 1024
INJECTION = "' OR 1=1 --"
HUGE = "9" * 5000


@dataclass(frozen=True)
class Bad:
    method: str
    path: str
    status: int | frozenset[int]
    body: bytes | None = None
    params: dict[str, str] = field(default_factory=dict)
    headers: dict[str, str] = field(default_factory=dict)
    code: str | None = None


def _json(value: Any) -> bytes:
    return json.dumps(value).encode()


# -- the table ---------------------------------------------------------------------------------

BAD_IDS = [
    "abc", "-1", "0", "1.5", "1e3", "0x10", "+5", "%205", "5%20", "1%00", "%EF%BC%91%EF%BC%92",
    "9223372036854775808", "9" * 19, "9" * 30, HUGE, "0" * 4400 + "1", "00000000000000000001",
    "null", "%5B%5D", "1;DROP%20TABLE%20x",
    "%27%20OR%201%3D1%20--",
]
BAD_QUEUES = [
    ("%2e%2e", 400), ("%2E", 400), ("x" * 65, 400), ("bad%20name", 400),
    ("%C3%BCn%C3%AF", 400), ("default%0A", 400), ("%27%20OR%201%3D1%20--", 400),
    ("default%00", 400), ("no-such-queue", 404), ("a%2Fb", 404), ("..%2f..%2f", 404),
]
BAD_LIST_PARAMS: list[tuple[dict[str, str], int]] = [
    ({"status": "bogus"}, 400), ({"status": "QUEUED"}, 400), ({"status": "queued "}, 400),
    ({"limit": "0"}, 400), ({"limit": "-1"}, 400), ({"limit": "501"}, 400),
    ({"limit": "100000"}, 400), ({"limit": "abc"}, 400), ({"limit": "1.5"}, 400),
    ({"limit": HUGE}, 400), ({"limit": "0" * 4400 + "5"}, 400), ({"limit": ""}, 400),
    ({"limit": "١٢"}, 400), ({"cursor": "abc"}, 400), ({"cursor": "0" * 4400 + "5"}, 400),
    ({"cursor": "-5"}, 400), ({"cursor": "9" * 20}, 400), ({"cursor": HUGE}, 400),
    ({"queue": INJECTION}, 400), ({"queue": "x" * 65}, 400), ({"tenant": "x" * 201}, 400),
    ({"job_type": "y" * 201}, 400),
    ({"order": "random"}, 400), ({"order": "NEWEST"}, 400), ({"order": HUGE}, 400),
    ({"q": "x" * 201}, 400), ({"scheduled": "yes"}, 400), ({"scheduled": "TRUE"}, 400),
]
#: The fleet dashboard's reads (admin/fleet.py).
BAD_STATS_PARAMS: list[dict[str, str]] = [
    {"minutes": "0"}, {"minutes": "1441"}, {"minutes": "-5"}, {"minutes": "abc"},
    {"minutes": HUGE}, {"minutes": "1.5"}, {"by": "tenant"}, {"by": INJECTION},
    {"by": "QUEUE"},
]
#: Filters that are well-formed but hold SQL: each must simply match nothing (200, empty).
SQLISH_FILTERS: list[dict[str, str]] = [
    {"tenant": INJECTION}, {"job_type": INJECTION}, {"tenant": "t1' --"},
    {"job_type": "sys:noop' OR '1'='1"}, {"tenant": "'; DROP TABLE background_jobs; --"},
    {"job_type": "%"}, {"tenant": "_"}, {"tenant": "*"}, {"tenant": "\x00"},
    {"job_type": "sys:noop\x00"}, {"tenant": "default\\"}, {"tenant": "$ne"},
]
#: Searches that are well-formed but hold SQL or LIKE wildcards: literal text, matching nothing.
SQLISH_SEARCHES: list[dict[str, str]] = [
    {"q": INJECTION}, {"q": "%"}, {"q": "_"}, {"q": "\\"}, {"q": "\x00"}, {"q": "%' --"},
    {"q": "%", "order": "oldest"}, {"q": "_", "scheduled": "true"},
]
BAD_BODIES: list[tuple[bytes, str]] = [
    (b"{bad", "bad_json"), (b"[1]", "bad_request"), (b'"str"', "bad_request"),
    (b"null", "bad_request"), (b"123", "bad_request"), (b"true", "bad_request"),
    (b'{"x": 1}', "bad_request"), (b"\xff\xfe\x00{", "bad_json"), (b"{\"a\": \"\xc3\x28\"}", "bad_json"),
    (b"[" * 500 + b"]" * 500, "bad_request"), (b"[" * (MAX_BODY - 10), "bad_json"),
    (b'{"limit": 1e999}', "bad_request"), (('{"limit": ' + "9" * 900 + "}").encode(), "bad_request"),
    (b'{"a": NaN}', "bad_request"), (b"{}{}", "bad_json"), (b"\x00", "bad_json"),
    (b" ", "bad_json"), (b"\r\n\t", "bad_json"),  # found by schemathesis: read as no body
]
BAD_BULK: list[Any] = [
    {"limit": "5"}, {"limit": True}, {"limit": 0}, {"limit": 10001}, {"limit": 1.5},
    {"limit": [1]}, {"limit": -1}, {"queue": 5}, {"queue": "bad name"}, {"queue": INJECTION},
    {"tenant": {"$ne": 1}}, {"job_type": ["a"]}, {"tenant": "x" * 201}, {"status": "dead"},
    {"unknown": 1},
]
WRONG_METHODS = [
    ("DELETE", "/v1/jobs"), ("PUT", "/v1/drain"), ("GET", "/v1/drain"), ("GET", "/v1/pause"),
    ("PATCH", "/v1/queues/default/pause"), ("GET", "/v1/queues/default/resume"),
    ("GET", "/v1/jobs/retry"), ("PUT", "/v1/jobs/1"), ("POST", "/healthz"),
    ("POST", "/v1/status"), ("POST", "/metrics"), ("PUT", "/v1/jobs/1/cancel"),
    ("POST", "/v1/openapi.json"), ("DELETE", "/v1/queues"),
]
#: Requests sent as raw bytes by ``_raw_cases``.
RAW_CASES = 6
#: Query parameters the route does not declare (a typo, a fuzzer's extra): a 400, never
#: silently ignored; ``wait_s`` typed wrong must not turn a long-poll into an instant answer.
UNKNOWN_QUERY: list[tuple[str, str, dict[str, str]]] = [
    ("GET", "/v1/jobs/1", {"wiat_s": "5"}), ("GET", "/v1/jobs/1", {"wait_s": "0", "x": ""}),
    ("GET", "/v1/jobs", {"stauts": "dead"}), ("GET", "/v1/jobs", {"\U0001d413he": "m"}),
    ("GET", "/v1/status", {"verbose": "1"}), ("POST", "/v1/drain", {"exit": "false", "now": "1"}),
    ("GET", "/v1/stats/throughput", {"minute": "5"}), ("GET", "/v1/periodic", {"n": "3"}),
]
UNKNOWN_PATHS = ["/v1/nope", "/v2/status", "/v1/jobs/1/delete", "/v1/queues/default",
                 "/admin", "/v1/jobs/1/retry/now", "/.env", "/v1/../../etc/passwd"]


def table(admin: Admin) -> list[Bad]:
    cases: list[Bad] = []
    for raw in BAD_IDS:
        cases.append(Bad("GET", f"/v1/jobs/{raw}", 400))
        cases.append(Bad("POST", f"/v1/jobs/{raw}/retry", 400))
        cases.append(Bad("POST", f"/v1/jobs/{raw}/cancel", 400))
    cases.append(Bad("GET", "/v1/jobs/..%2f..%2fetc%2fpasswd", 404))
    cases.append(Bad("POST", "/v1/jobs/..%2f..%2fetc%2fpasswd/retry", 404))
    for raw, status in BAD_QUEUES:
        cases.append(Bad("POST", f"/v1/queues/{raw}/pause", status))
        cases.append(Bad("POST", f"/v1/queues/{raw}/resume", status))
    for params, status in BAD_LIST_PARAMS:
        cases.append(Bad("GET", "/v1/jobs", status, params=params))
    for params in BAD_STATS_PARAMS:
        cases.append(Bad("GET", "/v1/stats/throughput", 400, params=params))
    for action in ("drain", "pause", "resume"):
        cases.append(Bad("POST", f"/v1/fleet/no-such-daemon/{action}", 404,
                         code="unknown_daemon"))
        cases.append(Bad("POST", f"/v1/fleet/{INJECTION}/{action}", 404))
        cases.append(Bad("POST", f"/v1/fleet/{'x' * 300}/{action}", 400))
        cases.append(Bad("GET", f"/v1/fleet/w1/{action}", 405))
    cases.append(Bad("POST", "/v1/fleet/w1/stop", 404))
    cases.append(Bad("POST", "/v1/jobs/counts", 405))
    for value in ("maybe", "TRUE", "yes", "2", ""):
        if value:
            cases.append(Bad("POST", "/v1/drain", 400, params={"exit": value}))
    for body, code in BAD_BODIES:
        for path in ("/v1/drain", "/v1/jobs/retry", "/v1/queues/default/pause", "/v1/jobs/1/cancel"):
            cases.append(Bad("POST", path, 400, body=body, code=code,
                             headers={"Content-Type": "application/json"}))
    for bulk in BAD_BULK:
        cases.append(Bad("POST", "/v1/jobs/retry", 400, body=_json(bulk)))
    oversized = b'{"tenant": "' + b"x" * (MAX_BODY + 100) + b'"}'
    for path in ("/v1/jobs/retry", "/v1/drain", "/v1/reload", "/v1/jobs/1/retry"):
        cases.append(Bad("POST", path, 413, body=oversized, code="request_entity_too_large"))
    for method, path in WRONG_METHODS:
        cases.append(Bad(method, path, 405, code="method_not_allowed"))
    for path in UNKNOWN_PATHS:
        cases.append(Bad("GET", path, 404))
    for method, path, params in UNKNOWN_QUERY:
        cases.append(Bad(method, path, 400, params=params, code="bad_request"))
    return cases


# -- the test ----------------------------------------------------------------------------------


async def test_bad_requests_get_json_4xx_and_change_nothing(stack: Stack) -> None:
    async with admin_worker(stack, admin_max_body_bytes=MAX_BODY) as admin:
        client = admin.worker.client
        # Data an injection would reveal or touch if it worked.
        parked = [(await client.enqueue("sys:noop", {"n": i}, queue=PARKED, tenant_id="t1")).id
                  for i in range(3)]
        dead = (await client.enqueue("sys:fail", {"retryable": False}, tenant_id="t1")).id
        await admin.wait_job(dead, "dead")
        before = await admin.get("/v1/jobs", params={"limit": 500})
        tried = 0
        for case in table(admin):
            response = await admin.http.request(
                case.method, case.path, params=case.params, content=case.body,
                headers=case.headers)
            label = f"{case.method} {case.path} {case.params} {case.body!r:.60}"
            code = assert_json_error(response, case.status, label)
            if case.code is not None:
                assert code == case.code, (label, code)
            if case.status == 405:
                assert response.headers.get("allow"), label
            tried += 1

        for filters in SQLISH_FILTERS:
            response = await admin.http.get("/v1/jobs", params=filters)
            assert response.status_code == 200, (filters, response.text)
            assert response.json() == {"jobs": [], "next_cursor": None}, filters
            tried += 1
        for filters in SQLISH_SEARCHES:
            response = await admin.http.get("/v1/jobs", params=filters)
            assert response.status_code == 200, (filters, response.text)
            assert response.json() == {"jobs": [], "next_cursor": None}, filters
            tried += 1
        for filters in SQLISH_FILTERS:
            retried = await admin.post("/v1/jobs/retry", json=filters)
            assert retried == {"retried": 0, "ids": []}, filters
            tried += 1
        # A well-formed cursor past the largest possible id ends the listing.
        past = await admin.get("/v1/jobs", params={"cursor": "9" * 19, "order": "oldest"})
        assert past == {"jobs": [], "next_cursor": None}
        tried += 1
        tried += await _raw_cases(admin)

        assert tried == (len(table(admin)) + 2 * len(SQLISH_FILTERS) + len(SQLISH_SEARCHES) + 1
                         + RAW_CASES), tried
        print(f"\n[admin bad inputs] {stack.name}: {tried} bad inputs tried")

        # Nothing changed: same jobs, still dead, nothing paused or draining.
        assert await admin.get("/v1/jobs", params={"limit": 500}) == before
        assert {(await admin.job(i))["status"] for i in parked} == {"queued"}
        status = await admin.status()
        assert (status["draining"], status["paused"], status["paused_queues"]) == (False, False, [])
        assert (await admin.get("/readyz"))["status"] == "ready"


async def _raw_cases(admin: Admin) -> int:
    """Requests an HTTP client library would rewrite: dot segments kept as they are, a body
    announced by chunks with no length, a body longer than announced."""
    port = admin.port
    tried = 0
    for target, status in (("/v1/queues/../pause", 400), ("/v1/queues/./pause", 400),
                           ("/v1/jobs/../jobs/1/cancel", 404), ("/v1/queues/%2e%2e/pause", 400),
                           ("/v1/jobs/..%2f..%2fetc%2fpasswd", 404)):
        response = await raw_http(port, raw_request("POST" if "pause" in target or "cancel" in target
                                                    else "GET", target, port))
        assert response.status == status, (target, response)
        body = json.loads(response.body)
        assert set(body) == {"error"}, (target, body)
        tried += 1
    chunk = b"x" * 600
    chunked = (f"POST /v1/jobs/retry HTTP/1.1\r\nHost: 127.0.0.1:{port}\r\n"
               "Transfer-Encoding: chunked\r\nContent-Type: application/json\r\n\r\n").encode()
    for _ in range(3):
        chunked += f"{len(chunk):x}\r\n".encode() + chunk + b"\r\n"
    chunked += b"0\r\n\r\n"
    response = await raw_http(port, chunked)
    assert response.status == 413, response
    assert json.loads(response.body)["error"]["code"] == "request_entity_too_large"
    tried += 1
    return tried
