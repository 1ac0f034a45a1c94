"""The no-op handler of ``gochatd bench --scenario budget`` (``gochatd serve --handlers``
this module). Its first and only action appends ``"<job id> <time.time()>"`` to
``$BUDGET_RECORD_FILE`` with one ``os.write`` on an ``O_APPEND`` descriptor: the handler-start
clock of the budget's latency stages. pgqueuer's twin is in budget_pgq.py."""

from __future__ import annotations

import os
import time

import gochatd

JOB_TYPE = "bench:budget"
_fd: dict[int, int] = {}  # pid -> descriptor (a forked child opens its own)


def record_start(job_id: int) -> None:
    now = time.time()
    pid = os.getpid()
    fd = _fd.get(pid)
    if fd is None:
        fd = _fd[pid] = os.open(os.environ["BUDGET_RECORD_FILE"],
                                os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
    os.write(fd, b"%d %.6f\n" % (job_id, now))


@gochatd.job(JOB_TYPE, queue="default", max_attempts=3)
async def budget_noop(ctx: gochatd.JobContext) -> None:
    record_start(ctx.job_id)
