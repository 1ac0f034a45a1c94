"""Helpers for the admin API tests: a Worker with its admin server on an ephemeral loopback
port plus an ``httpx.AsyncClient`` for it, raw HTTP for requests a client library would
normalise, and the address a daemon process logged."""

from __future__ import annotations

import dataclasses
import json
from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import asynccontextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

import httpx
import trio
import yaml

from gochatd.config.settings import FIELDS, Settings
from gochatd.worker.registry import Registry
from gochatd.worker.service import Worker
from tests.integration.helpers import WorkerRun, make_registry, started_worker
from tests.support.daemon_process import DaemonProcess
from tests.support.harness import make_settings
from tests.support.wait import wait_until

#: The queue the workers in these tests never claim from: jobs put there stay as enqueued.
PARKED = "parked"


@dataclass(frozen=True)
class Stack:
    name: str
    database_url: str
    redis_url: str

    @property
    def mode(self) -> str:
        """The dispatch mode a worker on this stack reports."""
        return "streams" if self.redis_url else "polling"


@dataclass(eq=False)
class Admin:
    """One running worker and a client for its admin API."""

    run: WorkerRun
    http: httpx.AsyncClient

    @property
    def worker(self) -> Worker:
        return self.run.worker

    @property
    def port(self) -> int:
        port = urlsplit(str(self.http.base_url)).port
        assert port is not None
        return port

    async def get(self, path: str, status: int = 200, **kwargs: Any) -> Any:
        response = await self.http.get(path, **kwargs)
        assert response.status_code == status, f"GET {path}: {response.status_code} {response.text}"
        return response.json()

    async def post(self, path: str, status: int = 200, **kwargs: Any) -> Any:
        response = await self.http.post(path, **kwargs)
        assert response.status_code == status, f"POST {path}: {response.status_code} {response.text}"
        return response.json()

    async def status(self) -> dict[str, Any]:
        body: dict[str, Any] = await self.get("/v1/status")
        return body

    async def queues(self) -> dict[str, dict[str, Any]]:
        body = await self.get("/v1/queues")
        return {q["queue"]: q for q in body["queues"]}

    async def job(self, job_id: int) -> dict[str, Any]:
        body: dict[str, Any] = await self.get(f"/v1/jobs/{job_id}")
        return body

    async def job_as(self, job_id: int, headers: dict[str, str]) -> dict[str, Any]:
        body: dict[str, Any] = await self.get(f"/v1/jobs/{job_id}", headers=headers)
        return body

    async def wait_job(self, job_id: int, *statuses: str, timeout_s: float = 10.0) -> dict[str, Any]:
        async def probe() -> dict[str, Any] | None:
            job = await self.job(job_id)
            return job if job["status"] in statuses else None

        job = await wait_until(probe, timeout_s=timeout_s, what=f"job {job_id} in {statuses}")
        assert job is not None
        return job

    async def wait_status(
        self, predicate: Callable[[dict[str, Any]], bool], *, timeout_s: float = 10.0, what: str
    ) -> dict[str, Any]:
        async def probe() -> dict[str, Any] | None:
            status = await self.status()
            return status if predicate(status) else None

        status = await wait_until(probe, timeout_s=timeout_s, what=what)
        assert status is not None
        return status


def admin_settings(stack: Stack, **overrides: Any) -> Settings:
    return make_settings(stack.database_url, stack.redis_url, admin_listen="127.0.0.1:0", **overrides)


@asynccontextmanager
async def admin_worker(
    stack: Stack,
    *,
    registry: Registry | None = None,
    reload_args: dict[str, Any] | None = None,
    **overrides: Any,
) -> AsyncIterator[Admin]:
    """A Worker on ``stack`` whose admin server listens on 127.0.0.1:<ephemeral>."""
    settings = admin_settings(stack, **overrides)
    async with started_worker(
        settings, registry=registry or make_registry(), reload_args=reload_args
    ) as run:
        address = run.worker.admin_address
        assert address is not None and address.startswith("http://127.0.0.1:"), address
        async with httpx.AsyncClient(base_url=address, timeout=15.0) as http:
            yield Admin(run, http)


async def stays_true(
    probe: Callable[[], Awaitable[bool]], *, for_s: float, what: str, interval_s: float = 0.05
) -> int:
    """Check that ``probe`` holds at every look during a whole observation window (how long
    something does *not* happen); returns how many looks were taken."""
    deadline = trio.current_time() + for_s
    looks = 0
    while True:
        assert await probe(), f"{what}: stopped holding after {looks} looks"
        looks += 1
        if trio.current_time() >= deadline:
            return looks
        await trio.sleep(interval_s)


def assert_json_error(
    response: httpx.Response, status: int | frozenset[int], what: str = ""
) -> str:
    """A 4xx JSON error body ``{"error": {"code", "message"}}``; returns the code."""
    allowed = {status} if isinstance(status, int) else status
    label = what or f"{response.request.method} {response.request.url}"
    assert response.status_code in allowed, f"{label}: {response.status_code} {response.text[:300]}"
    assert response.headers["content-type"].startswith("application/json"), label
    body = response.json()
    assert set(body) == {"error"}, (label, body)
    assert isinstance(body["error"]["code"], str) and body["error"]["code"], (label, body)
    assert isinstance(body["error"]["message"], str) and body["error"]["message"], (label, body)
    return str(body["error"]["code"])


# -- raw HTTP ----------------------------------------------------------------------------------


@dataclass(frozen=True)
class RawResponse:
    status: int
    headers: dict[str, str]
    body: bytes


async def raw_http(port: int, request: bytes, *, timeout_s: float = 10.0) -> RawResponse:
    """Send bytes as they are (no path normalisation, no header fix-ups) and read one
    response by its Content-Length (or chunked framing)."""
    with trio.fail_after(timeout_s):
        stream = await trio.open_tcp_stream("127.0.0.1", port)
        async with stream:
            await stream.send_all(request)
            data = b""
            while b"\r\n\r\n" not in data:
                chunk = await stream.receive_some(65536)
                assert chunk, f"connection closed before the response head: {data!r}"
                data += chunk
            head, _, rest = data.partition(b"\r\n\r\n")
            lines = head.decode("latin-1").split("\r\n")
            status = int(lines[0].split(" ")[1])
            headers = {}
            for line in lines[1:]:
                name, _, value = line.partition(":")
                headers[name.strip().lower()] = value.strip()
            if headers.get("transfer-encoding", "").lower() == "chunked":
                while not rest.endswith(b"0\r\n\r\n"):
                    chunk = await stream.receive_some(65536)
                    assert chunk, "connection closed inside a chunked body"
                    rest += chunk
                body, tail = b"", rest
                while True:
                    size_line, _, tail = tail.partition(b"\r\n")
                    size = int(size_line.split(b";")[0], 16)
                    if size == 0:
                        break
                    body += tail[:size]
                    tail = tail[size + 2:]
            else:
                length = int(headers.get("content-length", "0"))
                while len(rest) < length:
                    chunk = await stream.receive_some(65536)
                    assert chunk, "connection closed inside the body"
                    rest += chunk
                body = rest[:length]
    return RawResponse(status, headers, body)


def raw_request(
    method: str, target: str, port: int, *, body: bytes = b"", headers: dict[str, str] | None = None
) -> bytes:
    lines = [f"{method} {target} HTTP/1.1", f"Host: 127.0.0.1:{port}"]
    for name, value in (headers or {}).items():
        lines.append(f"{name}: {value}")
    lines.append(f"Content-Length: {len(body)}")
    return ("\r\n".join(lines) + "\r\n\r\n").encode("latin-1") + body


# -- daemon processes ------------------------------------------------------------------------


def daemon_admin_url(daemon: DaemonProcess, timeout_s: float = 20.0) -> str:
    """The admin server's base URL from the daemon's ``admin_listening`` log event (an
    unspecified bind address is reached through 127.0.0.1)."""
    event = daemon.wait_for_event("admin_listening", timeout_s=timeout_s)
    address = str(event["address"])
    parts = urlsplit(address)
    assert parts.scheme == "http" and parts.port, address
    return f"http://127.0.0.1:{parts.port}"


# -- configuration ---------------------------------------------------------------------------


def write_full_config(path: Path, settings: Settings, **changes: Any) -> None:
    """Every key of ``settings`` (with ``changes``) as a YAML config file, so a reload from
    it changes exactly the keys in ``changes``."""
    fresh = settings.with_changes(**changes)
    doc: dict[str, Any] = {}
    for spec in FIELDS:
        node = doc
        # "handlers" is both a key (the module list) and a section (handlers.http): in a
        # file the list is written as handlers.modules.
        key = "handlers.modules" if spec.key == "handlers" else spec.key
        *parents, leaf = key.split(".")
        for parent in parents:
            node = node.setdefault(parent, {})
        node[leaf] = json.loads(json.dumps(getattr(fresh, spec.attr), default=_plain))
    path.write_text(yaml.safe_dump(doc), encoding="utf-8")


def _plain(value: Any) -> Any:
    """Parsed sections (tenants, outbox channels) back to the mappings a file holds."""
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        return {k: v for k, v in dataclasses.asdict(value).items() if v is not None}
    raise TypeError(f"cannot write {type(value).__name__} to a config file")
