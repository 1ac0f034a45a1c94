"""Shared by the bad-input corpus: the one-line error contract of the command line, a batch
runner for ``gochatd`` processes, and a raw HTTP/1.1 client that sends exactly the bytes it
is given (no normalisation of paths, headers or bodies)."""

from __future__ import annotations

import contextlib
import json
import os
import re
import subprocess
from collections.abc import Callable, Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, TypeVar

import pytest
import trio

from tests.support.daemon_process import FORBIDDEN_OUTPUT, GOCHATD, REPO_ROOT, child_env

T = TypeVar("T")
C = TypeVar("C")

# -- the command line ------------------------------------------------------------------------


@dataclass(frozen=True)
class ProcResult:
    returncode: int
    stdout: str
    stderr: str


def run_gochatd(
    args: Sequence[str | bytes],
    env: Mapping[str, str] | None = None,
    *,
    cwd: Path | str = REPO_ROOT,
    timeout_s: float = 30.0,
) -> ProcResult:
    """``gochatd ARGS`` to completion. Arguments may be bytes (not valid UTF-8), which a
    shell can pass but a ``str`` cannot."""
    proc = subprocess.run(
        [GOCHATD, *args], env=child_env(env), cwd=cwd, capture_output=True, timeout=timeout_s,
        check=False, stdin=subprocess.DEVNULL,
    )
    return ProcResult(
        proc.returncode,
        proc.stdout.decode("utf-8", errors="replace"),
        proc.stderr.decode("utf-8", errors="replace"),
    )


def one_line_error(returncode: int, stdout: str, stderr: str, expect: str) -> str | None:
    """None when the output keeps the contract: exit 2, nothing on stdout, exactly one line
    on stderr that starts with ``gochatd:`` and contains ``expect``, and no traceback.
    Otherwise what is wrong, for the failure message."""
    problems = []
    if returncode != 2:
        problems.append(f"exit {returncode}, expected 2")
    if stdout:
        problems.append("something on stdout")
    lines = stderr.splitlines()
    if len(lines) != 1:
        problems.append(f"{len(lines)} lines on stderr, expected 1")
    elif not lines[0].startswith("gochatd: "):
        problems.append("stderr does not start with 'gochatd: '")
    elif expect.lower() not in lines[0].lower():
        problems.append(f"{expect!r} not in the message")
    problems.extend(f"output contains {bad!r}" for bad in FORBIDDEN_OUTPUT if bad in stderr + stdout)
    if not problems:
        return None
    return "; ".join(problems) + f"\n--- stdout ---\n{stdout[-2000:]}\n--- stderr ---\n{stderr[-3000:]}"


def run_parallel(fn: Callable[[C], T], cases: Sequence[C], workers: int | None = None) -> list[T]:
    """``fn`` over ``cases`` on a few threads (each call mostly waits for a child process)."""
    workers = workers or max(2, min(8, (os.cpu_count() or 2) * 2))
    with ThreadPoolExecutor(max_workers=workers) as pool:
        return list(pool.map(fn, cases))


def selected_params(
    request: pytest.FixtureRequest, name: str, kind: type[C], test: str | None = None
) -> list[C]:
    """The values of parameter ``name`` of this module's tests (of ``test`` only, if given)
    that this session will actually run: ``-k`` narrows a batch fixture as well."""
    out: list[C] = []
    for item in request.session.items:
        callspec = getattr(item, "callspec", None)
        if callspec is None or getattr(item, "module", None) is not request.module:
            continue
        if test is not None and getattr(item, "originalname", None) != test:
            continue
        value = callspec.params.get(name)
        if isinstance(value, kind) and value not in out:
            out.append(value)
    return out


# -- HTTP, byte for byte ---------------------------------------------------------------------


@dataclass
class RawResponse:
    status: int  # 0: the server closed the connection without answering
    reason: str
    headers: dict[str, str] = field(default_factory=dict)
    body: bytes = b""

    @property
    def content_type(self) -> str:
        return self.headers.get("content-type", "")

    def json(self) -> Any:
        return json.loads(self.body)


def _dechunk(data: bytes) -> bytes:
    out = b""
    while data:
        size_line, _, rest = data.partition(b"\r\n")
        size = int(size_line.split(b";")[0].strip() or b"0", 16)
        if size == 0:
            break
        out += rest[:size]
        data = rest[size + 2:]
    return out


def parse_response(raw: bytes) -> RawResponse:
    if not raw:
        return RawResponse(0, "closed without a response")
    head, _, body = raw.partition(b"\r\n\r\n")
    lines = head.decode("latin-1").split("\r\n")
    parts = lines[0].split(" ", 2)
    status = int(parts[1])
    headers: dict[str, str] = {}
    for line in lines[1:]:
        name, _, value = line.partition(":")
        headers[name.strip().lower()] = value.strip()
    if "chunked" in headers.get("transfer-encoding", "").lower():
        body = _dechunk(body)
    elif "content-length" in headers:
        body = body[: int(headers["content-length"])]
    return RawResponse(status, parts[2] if len(parts) > 2 else "", headers, body)


def _complete(raw: bytes) -> bool:
    """A whole response is in: headers plus the body its framing announces."""
    head, sep, body = raw.partition(b"\r\n\r\n")
    if not sep:
        return False
    headers = head.decode("latin-1").lower()
    if "transfer-encoding: chunked" in headers:
        return body.endswith(b"0\r\n\r\n")
    match = re.search(r"content-length:\s*(\d+)", headers)
    if match:
        return len(body) >= int(match.group(1))
    return head.split(b" ", 2)[1:2] in ([b"204"], [b"304"])


async def raw_exchange(host: str, port: int, request: bytes, timeout_s: float = 10.0) -> RawResponse:
    """Send ``request`` and read one response (or until the server closes). A server that
    answers early (413) and stops reading is fine: the send is abandoned, the answer read."""
    received = bytearray()
    with trio.fail_after(timeout_s):
        stream = await trio.open_tcp_stream(host, port)
        async with stream:

            async def send() -> None:
                with contextlib.suppress(trio.BrokenResourceError, trio.ClosedResourceError):
                    await stream.send_all(request)

            async with trio.open_nursery() as nursery:
                nursery.start_soon(send)
                while not _complete(bytes(received)):
                    try:
                        chunk = await stream.receive_some(65536)
                    except trio.BrokenResourceError:  # reset after an early answer
                        break
                    if not chunk:
                        break
                    received.extend(chunk)
                nursery.cancel_scope.cancel()
    return parse_response(bytes(received))


def http_request(
    method: str,
    target: str | bytes,
    *,
    headers: Mapping[str, str | bytes] | None = None,
    body: bytes = b"",
    host: str = "127.0.0.1",
    content_length: bool = True,
) -> bytes:
    """An HTTP/1.1 request with ``Connection: close``; header values may be raw bytes."""
    target_b = target if isinstance(target, bytes) else target.encode("utf-8")
    lines = [method.encode("ascii") + b" " + target_b + b" HTTP/1.1", b"Host: " + host.encode()]
    given = {k.lower() for k in (headers or {})}
    for name, value in (headers or {}).items():
        raw = value if isinstance(value, bytes) else value.encode("latin-1")
        lines.append(name.encode("latin-1") + b": " + raw)
    if "connection" not in given:
        lines.append(b"Connection: close")
    if content_length and "content-length" not in given and "transfer-encoding" not in given and (
        body or method in ("POST", "PUT", "PATCH")
    ):
        lines.append(b"Content-Length: " + str(len(body)).encode())
    return b"\r\n".join(lines) + b"\r\n\r\n" + body
