"""Handlers for the per-tenant concurrency tests, loaded by real daemons with
``--handlers tests.gateway.slot_handlers``.

``test:slot`` marks itself running with a file ``<dir>/running/<tenant>.<job_id>``, counts the
tenant's files (every daemon on the host shares the directory), appends that count to
``<dir>/counts.<tenant>``, sleeps ``seconds`` and removes its file. A count is never above the
tenant's running jobs in the database (the file goes before the job is finished), so a count
above max_running proves the limit was exceeded.
"""

from __future__ import annotations

import os
from pathlib import Path

import trio

import gochatd
from gochatd.context import JobContext


def _enter(folder: Path, tenant: str, job_id: int) -> None:
    running = folder / "running"
    running.mkdir(parents=True, exist_ok=True)
    (running / f"{tenant}.{job_id}").touch()
    count = sum(1 for p in running.iterdir() if p.name.startswith(f"{tenant}."))
    fd = os.open(folder / f"counts.{tenant}", os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
    try:
        os.write(fd, f"{count}\n".encode())
    finally:
        os.close(fd)


def _leave(folder: Path, tenant: str, job_id: int) -> None:
    (folder / "running" / f"{tenant}.{job_id}").unlink(missing_ok=True)


@gochatd.job("test:slot", queue="default")
async def slot(ctx: JobContext) -> None:
    folder = Path(ctx.payload["dir"])
    await trio.to_thread.run_sync(_enter, folder, ctx.tenant_id, ctx.job_id)
    try:
        await trio.sleep(float(ctx.payload.get("seconds", 0.2)))
    finally:
        with trio.CancelScope(shield=True):
            await trio.to_thread.run_sync(_leave, folder, ctx.tenant_id, ctx.job_id)


def counts(folder: Path, tenant: str) -> list[int]:
    path = folder / f"counts.{tenant}"
    return [int(x) for x in path.read_text().split()] if path.exists() else []
