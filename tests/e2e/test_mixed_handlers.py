"""A fleet whose daemons carry different handlers (docs/job-types.md, "A type no daemon can
run"), with the installed ``gochatd`` command: daemon A runs ``fleet:a`` (and the periodic
``fleet:tick``), daemon B runs ``fleet:b``; A reads Redis Streams, B either polls or streams
too. Before, a job reaching the daemon without its handler was ``dead`` with
``unknown_job_type`` at once.

- ``gochatd enqueue`` of a type only one daemon has: it runs there, never elsewhere, and no
  job dies. The sweep is pushed out of reach (600 s), so a job whose entry the other daemon
  acked can only have started through the capable daemon's backlog claim.
- A type no daemon has: it stays queued (no attempt spent), listed by ``/v1/job-types`` and
  counted by ``gochatd_jobs_without_handler``; a daemon with its handler then starts and
  runs it, and the listing empties.
- Periodic slots of a type only A has, declared on both daemons: each slot's job runs on A,
  whichever daemon took the slot; none dies."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import httpx
import pytest

from tests.admin.helpers import daemon_admin_url
from tests.support.daemon_process import DaemonFactory, DaemonProcess, poll_until, run_cli
from tests.support.fleet_handlers import LATE, ONLY_A, ONLY_B, TICK

JOBS_PER_TYPE = 6
#: Out of the tests' reach: a refused entry is not given a new one by the sweep.
NO_SWEEP = {"GOCHAT_WORKER_REDIS_SWEEP_INTERVAL_S": "600"}


def _env(database_url: str, redis_url: str) -> dict[str, str]:
    env = {"GOCHAT_DATABASE_URL": database_url, "GOCHAT_LOG_FORMAT": "json", **NO_SWEEP}
    if redis_url:
        env["GOCHAT_REDIS_URL"] = redis_url
    return env


def _start(daemons: DaemonFactory, name: str, module: str, env: dict[str, str],
           cwd: Path, mode: str) -> DaemonProcess:
    return daemons.start(name, ["--handlers", f"tests.support.{module}"], env=env, cwd=cwd,
                         mode=mode)


def _enqueue(env: dict[str, str], cwd: Path, job_type: str) -> int:
    done = run_cli(["enqueue", job_type, "--queue", "default", "--max-attempts", "3"], env,
                   cwd=cwd)
    assert done.returncode == 0 and done.stderr == "", done.stderr
    return int(json.loads(done.stdout)["id"])


def _jobs(env: dict[str, str], cwd: Path, *args: str) -> list[dict[str, Any]]:
    done = run_cli(["jobs", "list", "--json", *args], env, cwd=cwd)
    assert done.returncode == 0, done.stderr
    return list(json.loads(done.stdout))


def _show(env: dict[str, str], cwd: Path, job_id: int) -> dict[str, Any]:
    done = run_cli(["jobs", "show", str(job_id), "--json"], env, cwd=cwd)
    assert done.returncode == 0, done.stderr
    return dict(json.loads(done.stdout))


def _completed_by(daemon: DaemonProcess) -> set[int]:
    return {int(e["job_id"]) for e in daemon.events("job_completed")}


def _metric(text: str, name: str) -> float:
    """The sum of a family's samples (0 when absent)."""
    return sum(float(line.rsplit(" ", 1)[1]) for line in text.splitlines()
               if line.startswith(name) and not line.startswith("#"))


def _without_handler(http: httpx.Client, daemon: DaemonProcess) -> list[dict[str, Any]]:
    response = http.get(f"{daemon_admin_url(daemon)}/v1/job-types")
    assert response.status_code == 200, response.text
    return list(response.json()["without_handler"])


@pytest.mark.parametrize("b_mode", ["polling", "streams"])
def test_each_type_runs_where_its_handler_is_and_an_unknown_type_waits(
    b_mode: str, pg_clean: str, redis_url: str, tmp_path: Path, daemons: DaemonFactory
) -> None:
    env = _env(pg_clean, redis_url)
    assert run_cli(["db", "upgrade"], env, cwd=tmp_path).returncode == 0
    a = _start(daemons, "a", "fleet_handlers_a", env, tmp_path, "streams")
    b_env = env if b_mode == "streams" else {k: v for k, v in env.items()
                                             if k != "GOCHAT_REDIS_URL"}
    b = _start(daemons, "b", "fleet_handlers_b", b_env, tmp_path, b_mode)

    # Alternating, so that entries of each type reach the daemon that cannot run them.
    ids = {ONLY_A: [], ONLY_B: []}  # type: dict[str, list[int]]
    for _ in range(JOBS_PER_TYPE):
        for job_type in (ONLY_A, ONLY_B):
            ids[job_type].append(_enqueue(env, tmp_path, job_type))
    poll_until(lambda: set(ids[ONLY_A]) <= _completed_by(a), timeout_s=60, what="A's jobs")
    poll_until(lambda: set(ids[ONLY_B]) <= _completed_by(b), timeout_s=60, what="B's jobs")
    assert not _completed_by(a) & set(ids[ONLY_B]) and not _completed_by(b) & set(ids[ONLY_A])
    for job_id in ids[ONLY_A] + ids[ONLY_B]:
        shown = _show(env, tmp_path, job_id)
        assert (shown["status"], shown["attempts"]) == ("completed", 1), shown

    # A type no daemon has: it waits, visibly.
    late = _enqueue(env, tmp_path, LATE)
    with httpx.Client(timeout=10.0) as http:
        def refused_and_listed() -> str | None:
            metrics = http.get(f"{daemon_admin_url(a)}/metrics").text
            refused = sum(_metric(http.get(f"{daemon_admin_url(d)}/metrics").text,
                                  "gochatd_stream_entries_without_handler_total")
                          for d in ((a, b) if b_mode == "streams" else (a,)))
            listed = [w for w in _without_handler(http, b) if w["job_type"] == LATE]
            waiting = _metric(metrics, 'gochatd_jobs_without_handler{queue="default"}')
            return metrics if refused >= 1 and listed and waiting == 1 else None

        poll_until(refused_and_listed, timeout_s=30, what="the late job refused and listed")
        [listed] = [w for w in _without_handler(http, a) if w["job_type"] == LATE]
        assert (listed["queue"], listed["waiting"]) == ("default", 1)
        shown = _show(env, tmp_path, late)
        assert (shown["status"], shown["attempts"], shown["fence"]) == ("queued", 0, 0), shown

        # A daemon with its handler starts: it runs the job, and the listing empties.
        c = _start(daemons, "c", "fleet_handlers_late", env, tmp_path, "streams")
        poll_until(lambda: late in _completed_by(c), timeout_s=30, what="the late job run")
        poll_until(lambda: not _without_handler(http, a), timeout_s=20,
                   what="an empty without_handler")
        assert _metric(http.get(f"{daemon_admin_url(a)}/metrics").text,
                       "gochatd_jobs_without_handler") == 0

    assert _jobs(env, tmp_path, "--status", "dead") == []
    for daemon in (a, b, c):
        assert daemon.stop() == 0
        daemon.assert_clean_output()
        assert not daemon.events("job_unknown_type")


def test_periodic_slots_run_on_the_daemon_with_the_handler(
    pg_clean: str, redis_url: str, tmp_path: Path, daemons: DaemonFactory
) -> None:
    env = {**_env(pg_clean, redis_url),
           "GOCHAT_PERIODIC": json.dumps({TICK: {"every": "1s"}})}
    assert run_cli(["db", "upgrade"], env, cwd=tmp_path).returncode == 0
    a = _start(daemons, "a", "fleet_handlers_a", env, tmp_path, "streams")
    b = _start(daemons, "b", "fleet_handlers_b", env, tmp_path, "streams")

    # Both take slots (the one whose round comes first each second); every slot's job runs
    # on A. Enough slots that B has taken some of them.
    def enqueued_by_both() -> bool:
        return bool(a.events("periodic_enqueued")) and bool(b.events("periodic_enqueued"))

    poll_until(enqueued_by_both, timeout_s=60, what="slots taken by both daemons")
    by_b = {int(e["job_id"]) for e in b.events("periodic_enqueued") if "job_id" in e}
    if by_b:
        poll_until(lambda: by_b <= _completed_by(a), timeout_s=30, what="B's slots run on A")
    ticks = poll_until(lambda: (jobs := _jobs(env, tmp_path, "--type", TICK,
                                               "--status", "completed")) and len(jobs) >= 4
                       and jobs, timeout_s=60, what="four completed slots")
    assert {int(j["id"]) for j in ticks} <= _completed_by(a)
    assert not _completed_by(b)
    assert _jobs(env, tmp_path, "--type", TICK, "--status", "dead") == []
    for daemon in (a, b):
        assert daemon.stop() == 0
        daemon.assert_clean_output()
