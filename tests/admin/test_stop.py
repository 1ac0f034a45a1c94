"""Stopping the daemon stops the admin server cleanly and promptly: open keep-alive, idle
and half-sent connections do not hold the stop, an in-flight slow request is bounded by the
admin grace period, and afterwards the port refuses connections."""

from __future__ import annotations

import httpx
import pytest
import trio

from gochatd.worker.service import ADMIN_GRACE_S
from tests.admin.helpers import Stack, admin_worker


async def _read_to_eof(stream: trio.SocketStream, timeout_s: float) -> bytes:
    data = b""
    with trio.fail_after(timeout_s):
        while chunk := await stream.receive_some(65536):
            data += chunk
    return data


async def _refused(port: int) -> None:
    with pytest.raises(OSError):
        await trio.open_tcp_stream("127.0.0.1", port)
    async with httpx.AsyncClient(timeout=2.0) as http:
        with pytest.raises(httpx.ConnectError):
            await http.get(f"http://127.0.0.1:{port}/healthz")


async def test_stop_is_prompt_with_open_connections(stack: Stack) -> None:
    async with admin_worker(stack) as admin:
        port = admin.port
        # The client keeps its connection alive after a request ...
        assert (await admin.get("/healthz"))["status"] == "ok"
        # ... one connection never says anything, another stops half-way through its head.
        idle = await trio.open_tcp_stream("127.0.0.1", port)
        partial = await trio.open_tcp_stream("127.0.0.1", port)
        await partial.send_all(b"GET /healthz HTTP/1.1\r\nHost: 127.0.0.1\r\n")
        asked = trio.current_time()
        admin.worker.request_stop()
        with trio.fail_after(10):
            await admin.run.done.wait()
        took = trio.current_time() - asked
        assert took < 1.5, f"stop took {took:.2f}s with idle admin connections"
        assert admin.run.exit_code == 0
        # The server closed both connections.
        assert await _read_to_eof(idle, 2) == b""
        await _read_to_eof(partial, 2)
        await idle.aclose()
        await partial.aclose()
    await _refused(port)


async def test_a_slow_request_is_bounded_by_the_admin_grace(
    sqlite_stack: Stack
) -> None:
    async with admin_worker(sqlite_stack) as admin:
        port = admin.port
        slow = await trio.open_tcp_stream("127.0.0.1", port)
        # A request in flight: the body is announced but only half of it ever arrives.
        await slow.send_all(b"POST /v1/jobs/retry HTTP/1.1\r\nHost: 127.0.0.1\r\n"
                            b"Content-Type: application/json\r\nContent-Length: 40\r\n\r\n{\"tenant\":")
        # The slow request does not stop others from being served meanwhile.
        assert (await admin.get("/v1/status"))["stopping"] is False
        asked = trio.current_time()
        admin.worker.request_stop()
        with trio.fail_after(ADMIN_GRACE_S + 10):
            await admin.run.done.wait()
        took = trio.current_time() - asked
        assert took <= ADMIN_GRACE_S + 2.0, f"stop took {took:.2f}s"
        assert admin.run.exit_code == 0
        await _read_to_eof(slow, 2)
        await slow.aclose()
    await _refused(port)
