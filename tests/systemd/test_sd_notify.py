"""sd_notify from a real ``gochatd`` process to a real datagram socket: READY=1 once serving
(store open, dispatch running, admin server listening), WATCHDOG=1 pings from the event loop,
STATUS= lines, STOPPING=1 on SIGTERM and on drain, exit 0."""

from __future__ import annotations

import itertools
import json
import signal
import socket
import statistics
from collections.abc import Mapping, Sequence
from pathlib import Path

import httpx
import pytest

from tests.support.daemon_process import DaemonFactory, DaemonProcess, run_cli
from tests.systemd.notify import (
    Message,
    NotifyListener,
    is_ready,
    is_status_only,
    is_stopping,
    is_watchdog,
)

#: WATCHDOG_USEC for the tests: systemd's timeout 0.4 s, so a ping every 0.2 s.
WATCHDOG_USEC = "400000"


def start_notified(
    daemons: DaemonFactory,
    tmp_path: Path,
    listener: NotifyListener,
    *,
    name: str = "gochatd",
    args: Sequence[str] = (),
    env: Mapping[str, str] | None = None,
    watchdog_usec: str = WATCHDOG_USEC,
) -> DaemonProcess:
    """A daemon on SQLite in tmp_path (no Redis: dispatch mode ``polling``), started the way
    systemd starts a Type=notify service: NOTIFY_SOCKET and WATCHDOG_USEC in its environment."""
    daemon = DaemonProcess(tmp_path, name, args, {
        "GOCHAT_DATABASE_URL": f"sqlite:///{tmp_path / 'gochatd.db'}",
        "GOCHAT_LOG_FORMAT": "json",
        "NOTIFY_SOCKET": listener.address,
        "WATCHDOG_USEC": watchdog_usec,
        **(env or {}),
    }, cwd=tmp_path)
    daemon.env.pop("WATCHDOG_PID", None)  # as systemd would: ours, not an inherited one
    daemons.started.append(daemon)
    return daemon.start()


def free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as probe:
        probe.bind(("127.0.0.1", 0))
        port: int = probe.getsockname()[1]
        return port


def between(messages: Sequence[Message], start: Message, end: Message) -> list[Message]:
    return [m for m in messages if start.index < m.index < end.index]


def assert_lifecycle(listener: NotifyListener, daemon: DaemonProcess, *, min_pings: int) -> None:
    """Every message from the daemon's own pid (NotifyAccess=main); one READY, then pings,
    then STOPPING; nothing claims to be serving after STOPPING."""
    messages = listener.messages
    transcript = listener.transcript()
    assert {m.pid for m in messages} == {daemon.pid}, transcript
    readies = [m for m in messages if is_ready(m)]
    assert len(readies) == 1, transcript
    ready = readies[0]
    stopping = next(m for m in messages if is_stopping(m))
    assert ready.index < stopping.index, transcript
    pings = [m for m in between(messages, ready, stopping) if is_watchdog(m)]
    assert len(pings) >= min_pings, transcript
    for m in messages[stopping.index:]:
        assert not is_ready(m), transcript
        assert not (m.status or "").startswith(("serving", "paused")), transcript


@pytest.mark.parametrize("namespace", ["path", "abstract"])
def test_ready_watchdog_status_then_stopping_on_sigterm(
    tmp_path: Path, daemons: DaemonFactory, notify_socket: NotifyListener, namespace: str
) -> None:
    listener = notify_socket if namespace == "path" else NotifyListener.abstract()
    try:
        if namespace == "abstract":
            assert listener.address.startswith("@")
        daemon = start_notified(daemons, tmp_path, listener)

        ready = listener.wait_for(is_ready, what="READY=1", timeout_s=30, process=daemon)
        assert ready.status is not None and "mode polling" in ready.status, listener.transcript()
        assert ready.status.startswith("serving;"), listener.transcript()
        # The dispatch mode is logged before READY=1 is sent.
        assert daemon.events("dispatch_mode")[0]["mode"] == "polling"

        last_ping = listener.wait_for(is_watchdog, what="5 WATCHDOG=1 after READY", after=ready.index,
                                      count=5, timeout_s=10, process=daemon)
        status = listener.wait_for(is_status_only, what="a STATUS= line after READY",
                                   after=ready.index, timeout_s=10, process=daemon)
        assert status.status == "serving; mode polling; in flight 0"

        daemon.send(signal.SIGTERM)
        stopping = listener.wait_for(is_stopping, what="STOPPING=1", after=last_ping.index,
                                     timeout_s=15, process=daemon)
        assert (stopping.status or "").startswith("stopping"), listener.transcript()
        assert listener.collect_until_exit(daemon, timeout_s=15) == 0
        daemon.assert_clean_output()
        assert daemon.events("worker_stopped")[0]["forced"] is False

        assert_lifecycle(listener, daemon, min_pings=5)
        # WATCHDOG_USEC/2 apart: a ping every 0.2 s.
        pings = [m for m in between(listener.messages, ready, stopping) if is_watchdog(m)]
        gaps = [b.at - a.at for a, b in itertools.pairwise(pings)]
        assert 0.1 <= statistics.median(gaps) <= 0.6, gaps
    finally:
        if listener is not notify_socket:
            listener.close()


def test_ready_only_once_the_admin_server_answers(
    tmp_path: Path, daemons: DaemonFactory, notify_socket: NotifyListener
) -> None:
    port = free_port()
    daemon = start_notified(daemons, tmp_path, notify_socket,
                            env={"GOCHAT_ADMIN_LISTEN": f"127.0.0.1:{port}"})
    notify_socket.wait_for(is_ready, what="READY=1", timeout_s=30, process=daemon)
    # The first thing after READY=1: the admin server must already answer, and the store
    # and dispatch must be up (readiness probe).
    with httpx.Client(base_url=f"http://127.0.0.1:{port}", timeout=5) as http:
        health = http.get("/healthz")
        assert health.status_code == 200 and health.json() == {"status": "ok"}
        readiness = http.get("/readyz")
        assert readiness.status_code == 200, readiness.text
        assert readiness.json() == {"status": "ready", "store": "ok", "dispatch": "polling",
                                    "draining": False, "degraded": None}
    [listening] = daemon.events("admin_listening")
    assert listening["address"].endswith(f":{port}")

    daemon.send(signal.SIGTERM)
    notify_socket.wait_for(is_stopping, what="STOPPING=1", timeout_s=15, process=daemon)
    assert notify_socket.collect_until_exit(daemon, timeout_s=15) == 0
    daemon.assert_clean_output()


def test_ready_with_the_admin_server_off(
    tmp_path: Path, daemons: DaemonFactory, notify_socket: NotifyListener
) -> None:
    daemon = start_notified(daemons, tmp_path, notify_socket, args=["--admin-listen", "off"])
    ready = notify_socket.wait_for(is_ready, what="READY=1", timeout_s=30, process=daemon)
    assert ready.status == "serving; mode polling; in flight 0"
    assert daemon.events("admin_listening") == []
    daemon.send(signal.SIGTERM)
    assert notify_socket.collect_until_exit(daemon, timeout_s=15) == 0
    assert_lifecycle(notify_socket, daemon, min_pings=0)


def test_drain_then_exit_sends_stopping_and_keeps_pinging(
    tmp_path: Path, daemons: DaemonFactory, notify_socket: NotifyListener
) -> None:
    port = free_port()
    daemon = start_notified(daemons, tmp_path, notify_socket,
                            env={"GOCHAT_ADMIN_LISTEN": f"127.0.0.1:{port}"})
    listener = notify_socket
    ready = listener.wait_for(is_ready, what="READY=1", timeout_s=30, process=daemon)

    with httpx.Client(base_url=f"http://127.0.0.1:{port}", timeout=5) as http:
        # Drain without exit: STATUS says so, no STOPPING; resume: serving again.
        assert http.post("/v1/drain").status_code == 200
        draining = listener.wait_for(
            lambda m: (m.status or "").startswith("draining;"), what="STATUS=draining…",
            after=ready.index, process=daemon)
        assert not any(is_stopping(m) for m in listener.messages), listener.transcript()
        assert http.post("/v1/resume").status_code == 200
        serving = listener.wait_for(
            lambda m: (m.status or "").startswith("serving;"), what="STATUS=serving… again",
            after=draining.index, process=daemon)

        # A job in flight, then drain?exit=true.
        db_env = {"GOCHAT_DATABASE_URL": f"sqlite:///{tmp_path / 'gochatd.db'}"}
        enqueued = run_cli(["enqueue", "sys:sleep", "--payload", '{"seconds": 1.5}'], db_env,
                           cwd=tmp_path)
        assert enqueued.returncode == 0, enqueued.stderr
        job_id = json.loads(enqueued.stdout)["id"]
        listener.wait_for(lambda m: (m.status or "").endswith("in flight 1"),
                          what="STATUS=…in flight 1", after=serving.index, process=daemon)
        response = http.post("/v1/drain", params={"exit": "true"})
        assert response.status_code == 200, response.text
        body = response.json()
        assert body["draining"] is True and body["exit_when_drained"] is True
        assert body["in_flight"] == 1

    stopping = listener.wait_for(is_stopping, what="STOPPING=1 on drain?exit=true",
                                 after=serving.index, timeout_s=10, process=daemon)
    assert stopping.status == "draining; mode polling; in flight 1", listener.transcript()
    assert listener.collect_until_exit(daemon, timeout_s=20) == 0
    daemon.assert_clean_output()

    assert_lifecycle(listener, daemon, min_pings=1)
    # The job finished during the drain, and the watchdog kept pinging meanwhile.
    after_stopping = listener.messages[stopping.index + 1:]
    assert sum(is_watchdog(m) for m in after_stopping) >= 3, listener.transcript()
    shown = run_cli(["jobs", "show", str(job_id), "--json"], db_env, cwd=tmp_path)
    assert shown.returncode == 0, shown.stderr
    assert json.loads(shown.stdout)["status"] == "completed"


def test_a_wedged_event_loop_stops_the_watchdog_pings(
    tmp_path: Path, daemons: DaemonFactory, notify_socket: NotifyListener
) -> None:
    """The pings come from the event loop, not a thread: a handler that blocks the loop for
    1.5 s leaves a 1.5 s hole in them (systemd would kill a loop wedged beyond WatchdogSec)."""
    listener = notify_socket
    daemon = start_notified(daemons, tmp_path, listener, args=["--handlers", "tests.systemd.wedge_handlers"],
                            watchdog_usec="200000")
    ready = listener.wait_for(is_ready, what="READY=1", timeout_s=30, process=daemon)
    before = listener.wait_for(is_watchdog, what="3 pings", after=ready.index, count=3, process=daemon)

    db_env = {"GOCHAT_DATABASE_URL": f"sqlite:///{tmp_path / 'gochatd.db'}"}
    enqueued = run_cli(["enqueue", "test:wedge_loop", "--payload", '{"seconds": 1.5}'], db_env,
                       cwd=tmp_path)
    assert enqueued.returncode == 0, enqueued.stderr
    listener.pump_until(lambda: bool(daemon.events("job_completed")), what="the wedging job done")
    listener.wait_for(is_watchdog, what="3 pings after the wedge", after=listener.messages[-1].index,
                      count=3, process=daemon)

    pings = [m for m in listener.messages[before.index:] if is_watchdog(m)]
    gaps = [b.at - a.at for a, b in itertools.pairwise(pings)]
    assert max(gaps) >= 1.2, gaps  # no ping while the loop was blocked
    assert statistics.median(gaps) <= 0.5, gaps  # otherwise every 0.1 s

    daemon.send(signal.SIGTERM)
    assert listener.collect_until_exit(daemon, timeout_s=15) == 0
    assert_lifecycle(listener, daemon, min_pings=3)
