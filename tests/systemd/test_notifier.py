"""``Notifier`` and the watchdog loop in-process, against real datagram sockets."""

from __future__ import annotations

import os
import socket
import struct
import time
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest
import trio

from gochatd.config.settings import Settings
from gochatd.obs.counters import Counters
from gochatd.obs.sdnotify import Notifier
from gochatd.obs.watchdog import Watchdog
from gochatd.worker.lifecycle import Lifecycle
from gochatd.worker.pool import ActiveJobs
from gochatd.worker.service import Worker
from gochatd.worker.wakeup import Wakeups

_UCRED = struct.Struct("iII")


@pytest.fixture
def clean_env(monkeypatch: pytest.MonkeyPatch) -> pytest.MonkeyPatch:
    """No notify variables inherited from whatever runs the tests."""
    for name in ("NOTIFY_SOCKET", "WATCHDOG_USEC", "WATCHDOG_PID"):
        monkeypatch.delenv(name, raising=False)
    return monkeypatch


def _bind(address: str) -> socket.socket:
    sock = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM | socket.SOCK_CLOEXEC)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_PASSCRED, 1)
    sock.bind("\0" + address[1:] if address.startswith("@") else address)
    return sock


@pytest.fixture
def receiver(tmp_path: Path) -> Iterator[tuple[str, socket.socket]]:
    address = str(tmp_path / "n.sock")
    if len(address) > 107:
        address = f"@gochatd-unit/{uuid.uuid4().hex}"
    sock = _bind(address)
    try:
        yield address, sock
    finally:
        sock.close()


def _recv(sock: socket.socket, timeout_s: float = 5.0) -> tuple[str, int]:
    """One datagram and its sender's pid."""
    sock.settimeout(timeout_s)
    data, ancdata, _, _ = sock.recvmsg(4096, socket.CMSG_SPACE(_UCRED.size))
    pid = next(_UCRED.unpack(p[: _UCRED.size])[0] for lvl, kind, p in ancdata
               if lvl == socket.SOL_SOCKET and kind == socket.SCM_CREDENTIALS)
    return data.decode(), pid


# -- the watchdog interval ---------------------------------------------------------------------


def test_watchdog_interval_is_half_of_watchdog_usec(clean_env: pytest.MonkeyPatch) -> None:
    clean_env.setenv("WATCHDOG_USEC", "400000")
    assert Notifier("").watchdog_interval_s == pytest.approx(0.2)


def test_watchdog_pid_naming_us_keeps_the_watchdog(clean_env: pytest.MonkeyPatch) -> None:
    clean_env.setenv("WATCHDOG_USEC", "30000000")
    clean_env.setenv("WATCHDOG_PID", str(os.getpid()))
    assert Notifier("").watchdog_interval_s == pytest.approx(15.0)


def test_watchdog_pid_of_another_process_disables_the_watchdog(
    clean_env: pytest.MonkeyPatch,
) -> None:
    clean_env.setenv("WATCHDOG_USEC", "400000")
    clean_env.setenv("WATCHDOG_PID", str(os.getppid()))  # e.g. inherited from our parent
    assert os.getppid() != os.getpid()
    assert Notifier("").watchdog_interval_s is None


@pytest.mark.parametrize("usec", ["", "0", "-5", "abc", "1.5"])
def test_no_or_bad_watchdog_usec_disables_the_watchdog(
    clean_env: pytest.MonkeyPatch, usec: str
) -> None:
    if usec:
        clean_env.setenv("WATCHDOG_USEC", usec)
    assert Notifier("").watchdog_interval_s is None


# -- sending -----------------------------------------------------------------------------------


def test_without_notify_socket_nothing_is_sent_and_nothing_breaks(
    clean_env: pytest.MonkeyPatch,
) -> None:
    notifier = Notifier()
    assert notifier.path == "" and not notifier.enabled
    assert notifier.send(READY="1") is False
    notifier.ready("serving")
    notifier.status("serving")
    notifier.watchdog()
    notifier.stopping("stopping")


def test_a_missing_socket_is_not_an_error(clean_env: pytest.MonkeyPatch, tmp_path: Path) -> None:
    clean_env.setenv("NOTIFY_SOCKET", str(tmp_path / "nobody-listens.sock"))
    notifier = Notifier()
    assert notifier.enabled
    assert notifier.send(READY="1") is False
    notifier.ready("serving")
    assert Notifier("@gochatd-unit/nobody-listens").send(WATCHDOG="1") is False


def test_messages_arrive_as_one_datagram_each(
    clean_env: pytest.MonkeyPatch, receiver: tuple[str, socket.socket]
) -> None:
    address, sock = receiver
    clean_env.setenv("NOTIFY_SOCKET", address)
    notifier = Notifier()
    notifier.ready("serving; mode polling; in flight 0")
    notifier.status("draining; mode polling; in flight 2")
    notifier.watchdog()
    notifier.stopping("stopping; in flight 0")
    got = [_recv(sock) for _ in range(4)]
    assert [text for text, _ in got] == [
        "READY=1\nSTATUS=serving; mode polling; in flight 0",
        "STATUS=draining; mode polling; in flight 2",
        "WATCHDOG=1",
        "STOPPING=1\nSTATUS=stopping; in flight 0",
    ]
    assert {pid for _, pid in got} == {os.getpid()}


def test_abstract_namespace_socket(clean_env: pytest.MonkeyPatch) -> None:
    address = f"@gochatd-unit/{uuid.uuid4().hex}"
    with _bind(address) as sock:
        clean_env.setenv("NOTIFY_SOCKET", address)
        assert Notifier().send(READY="1", STATUS="x") is True
        assert _recv(sock) == ("READY=1\nSTATUS=x", os.getpid())


def test_a_newline_cannot_inject_an_assignment(receiver: tuple[str, socket.socket]) -> None:
    address, sock = receiver
    assert Notifier(address).send(STATUS="oops\nREADY=1") is True
    assert _recv(sock)[0] == "STATUS=oops READY=1"


def test_a_receiver_that_does_not_read_never_blocks_the_sender(
    receiver: tuple[str, socket.socket],
) -> None:
    address, _sock = receiver
    notifier = Notifier(address)
    started = time.monotonic()
    results = [notifier.send(WATCHDOG="1") for _ in range(5000)]
    assert time.monotonic() - started < 10
    assert results[0] is True
    assert results[-1] is False  # the queue filled up: dropped, not blocked


# -- the watchdog loop -------------------------------------------------------------------------


def _watchdog(notifier: Notifier) -> tuple[Watchdog, Lifecycle]:
    lifecycle = Lifecycle(ActiveJobs(), notifier=notifier, wakeups=Wakeups(),
                          counters=Counters(), worker_id="w")
    return Watchdog(notifier=notifier, lifecycle=lifecycle), lifecycle


def test_watchdog_is_not_started_without_notify_socket(
    clean_env: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    watchdog, _ = _watchdog(Notifier(""))
    assert not watchdog.enabled
    worker = Worker(Settings(database_url=f"sqlite:///{tmp_path / 'w.db'}"))
    assert not worker.watchdog.enabled
    assert worker.watchdog.run not in worker._root_loops()
    assert worker.reaper.run in worker._root_loops()


async def test_watchdog_loop_pings_then_adds_status_once_ready(
    clean_env: pytest.MonkeyPatch, tmp_path: Path, receiver: tuple[str, socket.socket]
) -> None:
    address, sync_sock = receiver
    clean_env.setenv("WATCHDOG_USEC", "100000")  # a ping every 0.05 s
    watchdog, lifecycle = _watchdog(Notifier(address))
    sock = trio.socket.from_stdlib_socket(sync_sock)

    async def next_message() -> str:
        return (await sock.recv(4096)).decode()

    with trio.fail_after(10):
        async with trio.open_nursery() as nursery:
            nursery.start_soon(watchdog.run)
            before_ready = [await next_message() for _ in range(3)]
            assert before_ready == ["WATCHDOG=1"] * 3  # no STATUS before READY
            lifecycle.ready.set()
            seen: list[str] = []
            while seen.count("WATCHDOG=1") < 3 or not any(m.startswith("STATUS=") for m in seen):
                seen.append(await next_message())
            assert "STATUS=serving; mode starting; in flight 0" in seen
            nursery.cancel_scope.cancel()


async def test_watchdog_loop_sends_status_only_when_the_watchdog_is_someone_elses(
    clean_env: pytest.MonkeyPatch, tmp_path: Path, receiver: tuple[str, socket.socket]
) -> None:
    address, sync_sock = receiver
    clean_env.setenv("WATCHDOG_USEC", "100000")
    clean_env.setenv("WATCHDOG_PID", str(os.getppid()))
    watchdog, lifecycle = _watchdog(Notifier(address))
    lifecycle.ready.set()
    sock = trio.socket.from_stdlib_socket(sync_sock)
    with trio.fail_after(10):
        async with trio.open_nursery() as nursery:
            nursery.start_soon(watchdog.run)
            assert (await sock.recv(4096)).decode() == "STATUS=serving; mode starting; in flight 0"
            nursery.cancel_scope.cancel()
