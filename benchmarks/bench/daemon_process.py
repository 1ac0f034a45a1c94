"""Figures about the daemon process itself, measured on a real ``gochatd serve`` child so that
the producers' CPU and memory are not counted:

- ``daemon``: CPU per job (utime + stime from /proc/<pid>/stat over an end-to-end run of N
  jobs with ``producers`` tasks in the bench process, after a warm-up) and RSS;
- ``soak``: N jobs (1M by default) fed with ``enqueue_many`` while the daemon runs, the
  backlog kept under ``SOAK_MAX_OUTSTANDING``; RSS at 10% of the jobs and at the end, peak.
"""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import sys
import tempfile
import time
from collections.abc import AsyncIterator
from pathlib import Path
from typing import IO, Any

import trio

from benchmarks.bench.inprocess import concurrent, noop_enqueue
from benchmarks.bench.options import BenchOptions
from benchmarks.bench.report import Report, progress
from benchmarks.bench.scratch import Probe, drop_streams, scratch_database, stream_prefix
from benchmarks.bench.throughput import bulk_enqueue
from gochatd.client.client import Client
from gochatd.errors import GochatdError
from gochatd.testing import migrate

WARMUP_JOBS = 500
SOAK_BATCH = 1_000
SOAK_MAX_OUTSTANDING = 20_000
SOAK_COUNT_INTERVAL_S = 1.0
_TICKS = os.sysconf("SC_CLK_TCK")
#: The child asks Linux for a SIGTERM when the bench dies (prctl PR_SET_PDEATHSIG), even
#: by SIGKILL, so no daemon outlives a bench. Done in the child, not in a preexec_fn: the
#: bench has threads, and forking with them must not run Python before exec.
_LAUNCH = ("import ctypes, signal, sys; ctypes.CDLL(None).prctl(1, signal.SIGTERM); "
           "from gochatd.cli.program import main; sys.exit(main())")


class ServeProcess:
    """``gochatd serve --worker-only`` as a child process, its log in a temporary file."""

    def __init__(self, database_url: str, redis_url: str, prefix: str, concurrency: int) -> None:
        env = {k: v for k, v in os.environ.items() if not k.startswith("GOCHAT_")}
        env.update({
            "GOCHAT_DATABASE_URL": database_url, "GOCHAT_REDIS_URL": redis_url,
            "GOCHAT_WORKER_REDIS_STREAM_PREFIX": prefix, "GOCHAT_WORKER_QUEUES": "default=1",
            "GOCHAT_WORKER_CONCURRENCY": str(concurrency), "GOCHAT_LOG_LEVEL": "warning",
            "GOCHAT_LOG_FORMAT": "json", "GOCHAT_ADMIN_LISTEN": "off",
        })
        self._log: IO[bytes] = tempfile.NamedTemporaryFile(  # noqa: SIM115 (closed in stop)
            prefix="gochatd-bench-serve-", suffix=".log")
        self.proc = subprocess.Popen(
            [sys.executable, "-c", _LAUNCH, "serve", "--worker-only", "--upgrade"],
            env=env, stdout=self._log, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
        )

    def cpu_s(self) -> float:
        fields = Path(f"/proc/{self.proc.pid}/stat").read_text().rpartition(")")[2].split()
        # utime and stime are fields 14 and 15 of the file: indexes 11 and 12 of what follows
        # "(comm)", which may itself contain spaces.
        return (int(fields[11]) + int(fields[12])) / _TICKS

    def rss_mb(self) -> float:
        for line in Path(f"/proc/{self.proc.pid}/status").read_text().splitlines():
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) / 1024
        return float("nan")

    def check_alive(self) -> None:
        if self.proc.poll() is not None:
            raise GochatdError(f"bench: the gochatd serve child exited with "
                               f"{self.proc.returncode}; its last log line: {self.last_log_line()}")

    def last_log_line(self) -> str:
        lines = Path(self._log.name).read_text(errors="replace").strip().splitlines()
        return lines[-1][-500:] if lines else "(none)"

    async def stop(self) -> None:
        with trio.CancelScope(shield=True):
            if self.proc.poll() is None:
                self.proc.send_signal(signal.SIGTERM)
                try:
                    await trio.to_thread.run_sync(self.proc.wait, 60)
                except subprocess.TimeoutExpired:
                    self.proc.kill()
                    await trio.to_thread.run_sync(self.proc.wait)
            self._log.close()


async def wait_for_completed(probe: Probe, serve: ServeProcess, target: int,
                             timeout_s: float, interval_s: float = 0.02) -> float:
    """Poll the rows until ``target`` jobs completed; return the perf_counter time."""
    with trio.fail_after(timeout_s):
        while await probe.completed() < target:
            serve.check_alive()
            await trio.sleep(interval_s)
    return time.perf_counter()


@contextlib.asynccontextmanager
async def _served(
    opts: BenchOptions, backend: str
) -> AsyncIterator[tuple[Client, Probe, ServeProcess]]:
    """A scratch database with a migrated schema, a client, a row probe and a running
    ``gochatd serve`` child; all of it removed afterwards."""
    redis_url = opts.redis_url if backend == "postgres+redis" else ""
    prefix = stream_prefix()
    try:
        async with scratch_database(backend, opts.pg_server) as url:
            await migrate(url)  # a Client refuses a database without the schema
            async with Client(url, redis_url or None, stream_prefix=prefix) as client:
                probe = Probe(url)
                serve = ServeProcess(url, redis_url, prefix, opts.concurrency)
                try:
                    yield client, probe, serve
                finally:
                    await serve.stop()
                    await probe.close()
    finally:
        if redis_url:
            await drop_streams(redis_url, prefix)


async def run_daemon(opts: BenchOptions, backend: str, report: Report) -> None:
    n = opts.sizes.jobs
    figures: dict[str, Any] = {"backend": backend, "jobs": n}
    async with _served(opts, backend) as (client, probe, serve):
        await bulk_enqueue(client, WARMUP_JOBS, batch=100)
        await wait_for_completed(probe, serve, WARMUP_JOBS, timeout_s=120)
        cpu0, t0 = serve.cpu_s(), time.perf_counter()
        made = await concurrent(noop_enqueue(client), n, opts.producers)
        t_end = await wait_for_completed(probe, serve, WARMUP_JOBS + made, 600)
        figures["e2e_jobs_per_s"] = made / (t_end - t0)
        figures["cpu_us_per_job"] = (serve.cpu_s() - cpu0) / made * 1e6
        figures["rss_mb"] = serve.rss_mb()

        cpu0, t0 = serve.cpu_s(), time.perf_counter()
        await bulk_enqueue(client, n)
        t_end = await wait_for_completed(probe, serve, WARMUP_JOBS + made + n, 600)
        figures["bulk_fed_jobs_per_s"] = n / (t_end - t0)
        figures["bulk_fed_cpu_us_per_job"] = (serve.cpu_s() - cpu0) / n * 1e6
    report.put("daemon", figures)


async def run_soak(opts: BenchOptions, backend: str, report: Report) -> None:
    total = opts.sizes.soak_jobs
    figures: dict[str, Any] = {"backend": backend, "jobs": total}
    async with _served(opts, backend) as (client, probe, serve):
        figures.update(await _soak(client, probe, serve, total))
    report.put("soak", figures)


async def _soak(client: Client, probe: Probe, serve: ServeProcess, total: int) -> dict[str, Any]:
    checkpoint = max(1, total // 10)
    enqueued = completed = 0
    peak = 0.0
    rss_at_checkpoint: float | None = None
    samples: list[tuple[int, float, float]] = []
    cpu0, t0 = serve.cpu_s(), time.perf_counter()
    counted_at = 0.0
    while completed < total:
        serve.check_alive()
        if enqueued < total and enqueued - completed < SOAK_MAX_OUTSTANDING:
            size = min(SOAK_BATCH, total - enqueued)
            await bulk_enqueue(client, size, batch=size)
            enqueued += size
        else:
            await trio.sleep(0.1)
        if time.perf_counter() - counted_at < SOAK_COUNT_INTERVAL_S:
            continue
        # Counting a million rows is not free: do it about once a second.
        completed, counted_at = await probe.completed(), time.perf_counter()
        rss = serve.rss_mb()
        if completed >= checkpoint:
            # Steady state starts once the pools, streams and caches are warm.
            peak = max(peak, rss)
            if rss_at_checkpoint is None:
                rss_at_checkpoint = rss
        if not samples or completed - samples[-1][0] >= checkpoint:
            samples.append((completed, rss, time.perf_counter() - t0))
            progress(f"  soak: {completed:,} of {total:,} jobs, RSS {rss:.1f} MB, "
                     f"{completed / (time.perf_counter() - t0):,.0f} jobs/s")
    elapsed = time.perf_counter() - t0
    rss_end = serve.rss_mb()
    assert rss_at_checkpoint is not None
    return {
        "jobs_per_s": total / elapsed, "elapsed_s": elapsed,
        "cpu_us_per_job": (serve.cpu_s() - cpu0) / total * 1e6,
        "rss_at_10pct_mb": rss_at_checkpoint, "rss_end_mb": rss_end,
        "rss_peak_mb": max(peak, rss_end),
        "rss_growth_pct": (rss_end - rss_at_checkpoint) / rss_at_checkpoint * 100,
        "rss_samples": [{"completed": c, "rss_mb": r, "t_s": round(t, 1)} for c, r, t in samples],
    }
