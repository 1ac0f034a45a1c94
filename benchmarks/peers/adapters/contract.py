"""The contract between the driver and an adapter, and the parts every adapter shares.

An adapter is a module run inside the peers' venv as
``python -m benchmarks.peers.adapters.<system>_adapter COMMAND``:

=================================================  ==========================================
``describe``                                        one JSON line: version, worker settings,
                                                    producer API, durability
``reset``                                           wipe this system's own state (its Redis DB
                                                    or its ``bench_*`` database) and set it up
``enqueue --n N --phase P --shape S [--spacing-ms]``  enqueue N jobs, print one JSON line with
                                                    the producer's first/last call times
``worker``                                          run the worker process(es) until SIGTERM
=================================================  ==========================================

Producer shapes (the same for every system, gochatd included):

- ``sequential``: one producer awaits (or blocks on) one enqueue at a time;
- ``concurrent``: ``PRODUCERS`` (8) tasks share one client, each awaiting one enqueue at a
  time (threads for synchronous clients); task *k* enqueues idx k, k+8, k+16, ...

Every job carries ``(idx, t_enq, phase)``; ``t_enq`` is ``time.time()`` taken just before the
enqueue call. The handler's first and only action is :func:`record_start`, which appends one
line ``"<t_start> <t_enq> <idx> <phase>\\n"`` to ``$PEERS_RECORD_FILE`` with a single
``os.write`` on an ``O_APPEND`` descriptor, so lines from threads, forked children and several
processes never interleave. The driver tails that file: it learns when handlers start without
asking the queue anything, and counts duplicates per phase.
"""

from __future__ import annotations

import argparse
import json
import os
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Awaitable, Callable
from contextlib import AbstractAsyncContextManager, AbstractContextManager
from dataclasses import dataclass
from importlib import metadata
from typing import Any, Protocol, cast

PRODUCERS = 8
#: host:port of the Redis the harness uses (databases 1..15, flushed); PEERS_REDIS_HOST
#: points a run at a private server.
REDIS_HOST = os.environ.get("PEERS_REDIS_HOST", "127.0.0.1:6379")
PG_SERVER = "postgresql://root@127.0.0.1:5432"

_record_fd: int | None = None
_record_pid: int | None = None


def record_start(idx: int, t_enq: float, phase: int) -> None:
    """Called first by every no-op handler: one line, one write, a few microseconds."""
    global _record_fd, _record_pid
    t_start = time.time()
    pid = os.getpid()
    if _record_fd is None or _record_pid != pid:  # forked workers open their own descriptor
        _record_fd = os.open(os.environ["PEERS_RECORD_FILE"], os.O_WRONLY | os.O_APPEND | os.O_CREAT,
                             0o644)
        _record_pid = pid
    os.write(_record_fd, b"%.6f %.6f %d %d\n" % (t_start, t_enq, idx, phase))


def version_of(distribution: str) -> str:
    try:
        return metadata.version(distribution)
    except metadata.PackageNotFoundError:
        return "not installed"


def redis_url(db: int) -> str:
    # db 0 is everybody's default database; the harness keeps out of it.
    if not 1 <= db <= 15:
        raise ValueError(f"redis db {db}: the harness uses databases 1..15 only")
    return f"redis://{REDIS_HOST}/{db}"


def flush_redis_db(url: str) -> None:
    """FLUSHDB of this system's own database number (never FLUSHALL)."""
    import redis

    client = redis.Redis.from_url(url)
    try:
        client.flushdb()
    finally:
        client.close()


def recreate_database(name: str, *, settings: dict[str, str] | None = None) -> str:
    """Drop and create a database the harness owns (``bench_*``); return its URL."""
    import psycopg

    if not name.startswith("bench_") or not name.replace("_", "").isalnum():
        raise ValueError(f"{name!r}: the harness only drops databases named bench_*")
    with psycopg.connect(f"{PG_SERVER}/postgres", autocommit=True) as conn:
        conn.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')
        conn.execute(f'CREATE DATABASE "{name}"')
        for key, value in (settings or {}).items():
            conn.execute(f'ALTER DATABASE "{name}" SET {key} = {value}')
    return f"{PG_SERVER}/{name}"


def bin_path(tool: str) -> str:
    """A console script of this venv (celery, dramatiq, pgq, ...)."""
    return os.path.join(os.path.dirname(sys.executable), tool)


@dataclass(frozen=True)
class Plan:
    n: int
    phase: int
    shape: str
    spacing_ms: float

    def indices(self, producer: int) -> range:
        if self.shape == "sequential":
            return range(self.n)
        return range(producer, self.n, PRODUCERS)

    @property
    def producers(self) -> int:
        return 1 if self.shape == "sequential" else PRODUCERS


EnqueueAsync = Callable[[int, float, int], Awaitable[Any]]
EnqueueSync = Callable[[int, float, int], Any]


class Adapter(Protocol):
    name: str

    def describe(self) -> dict[str, str]: ...

    def reset(self) -> None: ...

    def worker_commands(self) -> list[list[str]]: ...


class AsyncAdapter(Adapter, Protocol):
    #: "asyncio" or "trio": the event loop the producer runs on.
    backend: str

    def producer(self) -> AbstractAsyncContextManager[EnqueueAsync]: ...


class SyncAdapter(Adapter, Protocol):
    def producer(self) -> AbstractContextManager[EnqueueSync]: ...


async def produce_async(open_producer: Callable[[], AbstractAsyncContextManager[EnqueueAsync]],
                        plan: Plan) -> dict[str, Any]:
    import anyio  # runs on asyncio or trio: the same producer code for every async client

    async with open_producer() as enqueue_one:
        first: list[float] = []

        async def one_producer(k: int) -> None:
            for idx in plan.indices(k):
                t_enq = time.time()
                if not first:
                    first.append(t_enq)
                await enqueue_one(idx, t_enq, plan.phase)
                if plan.spacing_ms:
                    await anyio.sleep(plan.spacing_ms / 1000)

        async with anyio.create_task_group() as tg:
            for k in range(plan.producers):
                tg.start_soon(one_producer, k)
        t_end = time.time()
    return _timing(plan, first[0], t_end)


def produce_sync(open_producer: Callable[[], AbstractContextManager[EnqueueSync]],
                 plan: Plan) -> dict[str, Any]:
    with open_producer() as enqueue_one:
        first: list[float] = []
        errors: list[BaseException] = []

        def one_producer(k: int) -> None:
            try:
                for idx in plan.indices(k):
                    t_enq = time.time()
                    if not first:
                        first.append(t_enq)
                    enqueue_one(idx, t_enq, plan.phase)
                    if plan.spacing_ms:
                        time.sleep(plan.spacing_ms / 1000)
            except BaseException as exc:
                errors.append(exc)

        threads = [threading.Thread(target=one_producer, args=(k,)) for k in range(plan.producers)]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        if errors:
            raise errors[0]
        t_end = time.time()
    return _timing(plan, first[0], t_end)


def _timing(plan: Plan, t_first: float, t_end: float) -> dict[str, Any]:
    span = t_end - t_first
    return {"n": plan.n, "shape": plan.shape, "producers": plan.producers,
            "t_first": t_first, "t_end": t_end, "rate": plan.n / span if span > 0 else None}


def run_worker_commands(commands: list[list[str]]) -> int:
    """Run the worker command(s) until they exit.

    The driver stops workers the way a terminal's Ctrl-C does: one SIGTERM to the whole
    process group, which reaches every worker process directly (several of these CLIs count
    on that to stop their own child processes). So a single command replaces this process,
    and with several, this process only waits: passing the signal on would deliver it twice,
    and a second SIGTERM means "stop at once" to several systems, gochatd included.
    """
    if len(commands) == 1:
        os.execv(commands[0][0], commands[0])
    for signum in (signal.SIGTERM, signal.SIGINT):
        signal.signal(signum, lambda _signum, _frame: None)  # the children get it too
    procs = [subprocess.Popen(cmd) for cmd in commands]
    rc = 0
    for p in procs:
        rc = p.wait() or rc
    return rc


def _parser(name: str) -> argparse.ArgumentParser:
    ap = argparse.ArgumentParser(prog=f"{name}_adapter")
    sub = ap.add_subparsers(dest="command", required=True)
    sub.add_parser("describe")
    sub.add_parser("reset")
    enq = sub.add_parser("enqueue")
    enq.add_argument("--n", type=int, required=True)
    enq.add_argument("--phase", type=int, required=True)
    enq.add_argument("--shape", choices=["sequential", "concurrent"], default="sequential")
    enq.add_argument("--spacing-ms", type=float, default=0.0)
    sub.add_parser("worker")
    return ap


def _emit(obj: dict[str, Any]) -> None:
    sys.stdout.write(json.dumps(obj) + "\n")
    sys.stdout.flush()


def main(adapter: AsyncAdapter | SyncAdapter, argv: list[str] | None = None) -> int:
    args = _parser(adapter.name).parse_args(argv)
    if args.command == "describe":
        _emit(adapter.describe())
    elif args.command == "reset":
        adapter.reset()
        _emit({"ok": True})
    elif args.command == "enqueue":
        plan = Plan(args.n, args.phase, args.shape, args.spacing_ms)
        if isinstance(getattr(adapter, "backend", None), str):
            import anyio

            on_loop = cast(AsyncAdapter, adapter)
            _emit(anyio.run(produce_async, on_loop.producer, plan, backend=on_loop.backend))
        else:
            _emit(produce_sync(cast(SyncAdapter, adapter).producer, plan))
    elif args.command == "worker":
        return run_worker_commands(adapter.worker_commands())
    return 0


def module_command(module: str, *args: str) -> list[str]:
    """argv that runs another module of this package with this venv's interpreter."""
    return [sys.executable, "-m", module, *args]


__all__ = [
    "PRODUCERS",
    "Plan",
    "bin_path",
    "flush_redis_db",
    "main",
    "module_command",
    "record_start",
    "recreate_database",
    "redis_url",
    "version_of",
]
