"""One repetition of one system: reset, enqueue, drain, end-to-end, idle latency.

1. **enqueue**: no worker runs; one producer enqueues N jobs, one per call, sequentially.
2. **drain**: the workers start on that backlog. ``drain_jobs_s`` = (N-1) / (last - first
   handler start); ``drain_incl_start_jobs_s`` = N / (last handler start - worker launch).
3. **end-to-end**: the workers are warm and idle for 1 s; then 8 concurrent producer tasks
   (threads for sync clients) enqueue N more while the workers run. ``e2e_jobs_s`` = N / (last
   handler start - first enqueue call).
4. **end-to-end, one producer**: the same with one sequential producer (phase 4):
   ``e2e1_jobs_s``, a web app's request handler enqueueing as it goes.
5. **idle latency**: after >= 2 s idle, ``lat_n`` jobs one at a time, ``lat_spacing_ms`` apart;
   latency = handler start - the time taken just before the enqueue call.

Every phase waits on the record file with a deadline, so a stuck system fails its row and
the run goes on with the next system.
"""

from __future__ import annotations

import contextlib
import json
import os
import signal
import subprocess
import time
from dataclasses import dataclass
from statistics import fmean
from typing import Any

from benchmarks.peers.records import RecordTail, percentile
from benchmarks.peers.systems import System

POLL_S = 0.02
WARM_IDLE_S = 1.0
LATENCY_IDLE_S = 2.0


@dataclass(frozen=True)
class RunSettings:
    python: str
    repo: str
    run_dir: str
    n: int
    lat_n: int
    lat_spacing_ms: float
    phase_timeout_s: float


class PhaseFailed(Exception):
    """A phase did not finish: a timeout, a crashed worker or a failed adapter command."""


class Adapter:
    """Runs one system's adapter commands with the peers' venv python."""

    def __init__(self, system: System, settings: RunSettings, record_path: str, log_path: str) -> None:
        self.system = system
        self.settings = settings
        self.log_path = log_path
        self.env = dict(os.environ, **system.env, PYTHONPATH=settings.repo, PYTHONUNBUFFERED="1",
                        PEERS_RECORD_FILE=record_path, PEERS_RUN_DIR=settings.run_dir)
        self.env.pop("VIRTUAL_ENV", None)

    def argv(self, *args: str) -> list[str]:
        return [self.settings.python, "-m", self.system.module, *args]

    def call(self, *args: str, timeout_s: float) -> dict[str, Any]:
        """Run one sub-command; its last stdout line is JSON. Its stderr goes to the log."""
        with open(self.log_path, "ab") as log:
            log.write(f"\n$ {' '.join(args)}\n".encode())
            log.flush()
            try:
                done = subprocess.run(self.argv(*args), cwd=self.settings.repo, env=self.env,
                                      stdout=subprocess.PIPE, stderr=log, timeout=timeout_s)
            except subprocess.TimeoutExpired:
                raise PhaseFailed(f"`{args[0]}` took longer than {timeout_s:.0f} s") from None
        lines = done.stdout.decode().strip().splitlines()
        if done.returncode != 0 or not lines:
            raise PhaseFailed(f"`{args[0]}` exited {done.returncode}; see {self.log_path}")
        result: dict[str, Any] = json.loads(lines[-1])
        return result


class WorkerGroup:
    """The system's worker processes, in a session of their own so one signal reaches all."""

    def __init__(self, adapter: Adapter) -> None:
        self._log = open(adapter.log_path, "ab")  # noqa: SIM115 - closed in stop()
        self.launched_at = time.time()
        self.proc = subprocess.Popen(adapter.argv("worker"), cwd=adapter.settings.repo, env=adapter.env,
                                     stdout=self._log, stderr=subprocess.STDOUT, start_new_session=True)
        #: resource usage of the worker tree, once the leader has been reaped (see stop())
        self.rusage: Any = None

    def _reap(self, *, block: bool) -> bool:
        """Reap the leader with wait4, which also returns the CPU time of every descendant
        it waited for (the worker processes); True once it has exited."""
        if self.proc.returncode is not None:
            return True
        try:
            pid, status, usage = os.wait4(self.proc.pid, 0 if block else os.WNOHANG)
        except ChildProcessError:
            self.proc.returncode = -1
            return True
        if pid == 0:
            return False
        self.rusage = usage
        self.proc.returncode = os.waitstatus_to_exitcode(status)
        return True

    def alive(self) -> bool:
        return not self._reap(block=False)

    def cpu_s(self) -> float:
        """CPU time (user + system) so far of every live process of the worker group, from
        /proc: sampled around one phase, it is that phase's worker CPU."""
        tick = os.sysconf("SC_CLK_TCK")
        total = 0
        for entry in os.listdir("/proc"):
            if not entry.isdigit():
                continue
            try:
                with open(f"/proc/{entry}/stat", "rb") as f:
                    fields = f.read().rpartition(b")")[2].split()
            except OSError:
                continue
            # after the command: state, ppid, pgrp, ..., utime (12th), stime (13th)
            if int(fields[2]) == self.proc.pid:
                total += int(fields[11]) + int(fields[12])
        return total / tick

    def _group_alive(self) -> bool:
        try:
            os.killpg(self.proc.pid, 0)
        except ProcessLookupError:
            return False
        return True

    def stop(self, grace_s: float = 15.0) -> dict[str, Any]:
        """SIGTERM to the whole group (as a terminal's Ctrl-C reaches every process of a
        foreground job); SIGKILL to what is left after ``grace_s``."""
        t0 = time.time()
        with contextlib.suppress(ProcessLookupError):
            os.killpg(self.proc.pid, signal.SIGTERM)
        while self._group_alive() and time.time() - t0 < grace_s:
            self._reap(block=False)
            time.sleep(0.05)
        killed = self._group_alive()
        if killed:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(self.proc.pid, signal.SIGKILL)
        self._reap(block=True)
        self._log.close()
        result: dict[str, Any] = {"stop_s": round(time.time() - t0, 2), "sigkilled": killed}
        if self.rusage is not None and not killed:
            result["worker_cpu_s"] = self.rusage.ru_utime + self.rusage.ru_stime
        return result


def _wait_for(tail: RecordTail, phase: int, n: int, workers: WorkerGroup, timeout_s: float) -> None:
    deadline = time.time() + timeout_s
    while True:
        tail.poll()
        if tail.count(phase) >= n:
            return
        if not workers.alive():
            raise PhaseFailed(f"the worker exited with {workers.proc.returncode} "
                              f"({tail.count(phase)}/{n} started)")
        if time.time() > deadline:
            raise PhaseFailed(f"timeout after {timeout_s:.0f} s ({tail.count(phase)}/{n} started)")
        time.sleep(POLL_S)


def run_rep(system: System, rep: int, s: RunSettings) -> dict[str, Any]:
    n = min(s.n, system.n_cap or s.n)
    tag = f"{system.name}_rep{rep}"
    record_path = os.path.join(s.run_dir, f"{tag}.rec")
    adapter = Adapter(system, s, record_path, os.path.join(s.run_dir, f"{tag}.log"))
    row: dict[str, Any] = {"system": system.name, "rep": rep, "n": n, "error": None}
    tail = RecordTail(record_path)
    workers: WorkerGroup | None = None
    t_rep = time.time()
    try:
        adapter.call("reset", timeout_s=120)
        enq = adapter.call("enqueue", "--n", str(n), "--phase", "1", "--shape", "sequential",
                           timeout_s=s.phase_timeout_s)
        row["enqueue_jobs_s"] = enq["rate"]
        workers = WorkerGroup(adapter)
        _drain_phase(tail, row, n, workers, s)
        _end_to_end_phase(adapter, tail, row, n, workers, s)
        _end_to_end_phase(adapter, tail, row, n, workers, s, phase=4, shape="sequential",
                          key="e2e1")
        _latency_phase(adapter, tail, row, workers, s)
    except PhaseFailed as exc:
        row["error"] = str(exc)
    finally:
        if workers is not None:
            row.update(workers.stop())
        tail.poll()
        started = sum(tail.count(p) for p in (1, 2, 3, 4))
        if row.get("worker_cpu_s") and started and row["error"] is None:
            row["worker_cpu_us_per_job"] = row["worker_cpu_s"] * 1e6 / started
        for phase in (1, 2, 3, 4):
            row[f"duplicates_phase{phase}"] = tail.duplicates(phase)
        row["bad_record_lines"] = tail.bad_lines
        row["rep_wall_s"] = round(time.time() - t_rep, 1)
    return row


def _drain_phase(tail: RecordTail, row: dict[str, Any], n: int, workers: WorkerGroup,
                 s: RunSettings) -> None:
    cpu_before = workers.cpu_s()  # start-up included: the worker has not started one job
    try:
        _wait_for(tail, 1, n, workers, s.phase_timeout_s)
        row["drain_cpu_us_per_job"] = (workers.cpu_s() - cpu_before) * 1e6 / n
    finally:
        starts = [x.t_start for x in tail.starts[1]]
        if starts:
            row["worker_first_job_s"] = min(starts) - workers.launched_at
    first, last = min(starts), max(starts)
    row["drain_jobs_s"] = (n - 1) / (last - first) if last > first else None
    row["drain_incl_start_jobs_s"] = n / (last - workers.launched_at)


def _end_to_end_phase(adapter: Adapter, tail: RecordTail, row: dict[str, Any], n: int,
                      workers: WorkerGroup, s: RunSettings, *, phase: int = 2,
                      shape: str = "concurrent", key: str = "e2e") -> None:
    time.sleep(WARM_IDLE_S)  # warm and idle before the producer starts
    enq = adapter.call("enqueue", "--n", str(n), "--phase", str(phase), "--shape", shape,
                       timeout_s=s.phase_timeout_s)
    _wait_for(tail, phase, n, workers, s.phase_timeout_s)
    e2e = tail.starts[phase]
    row[f"{key}_jobs_s"] = n / (max(x.t_start for x in e2e) - enq["t_first"])
    row[f"{key}_producer_jobs_s"] = enq["rate"]
    lat = [x.latency_ms for x in e2e]
    row[f"{key}_lat_p50_ms"] = percentile(lat, 50)
    row[f"{key}_lat_p99_ms"] = percentile(lat, 99)


def _latency_phase(adapter: Adapter, tail: RecordTail, row: dict[str, Any], workers: WorkerGroup,
                   s: RunSettings) -> None:
    time.sleep(LATENCY_IDLE_S)  # the workers go idle: this measures wake-up, not queueing
    cpu_before = workers.cpu_s()
    enq = adapter.call("enqueue", "--n", str(s.lat_n), "--phase", "3", "--shape", "sequential",
                       "--spacing-ms", str(s.lat_spacing_ms), timeout_s=s.phase_timeout_s)
    _wait_for(tail, 3, s.lat_n, workers, 30)
    # Idle in between too: at 50 jobs/s, what a trickle costs the workers per job.
    row["lat_cpu_us_per_job"] = (workers.cpu_s() - cpu_before) * 1e6 / s.lat_n
    lat = [x.latency_ms for x in tail.starts[3]]
    row["lat_spacing_ms"] = (enq["t_end"] - enq["t_first"]) * 1000 / s.lat_n
    for p in (50, 95, 99):
        row[f"lat_p{p}_ms"] = percentile(lat, p)
    row["lat_mean_ms"] = fmean(lat)
    row["lat_max_ms"] = max(lat)
