"""gochatd: real ``gochatd serve`` daemon processes, fed by the public client ``gochatd.Client``.

Variants (``PEERS_GOCHATD_MODE``):

- ``streams`` (the headline row): PostgreSQL ``bench_gochatd`` + Redis Streams on Redis DB 8;
- ``polling``: PostgreSQL ``bench_gochatd_polling``, no Redis (LISTEN/NOTIFY wake-ups);
- ``sqlite``: the embedded default, a SQLite file in the run directory, no Redis, 1 process.

Settings (environment, defaults are what the report's rows use):
  PEERS_GOCHATD_PRODUCER     ``async`` (``gochatd.Client`` on Trio) or ``sync``
                             (``gochatd.SyncClient`` shared by the producer threads)
  PEERS_GOCHATD_PROCS        daemon processes (2 for PostgreSQL, as the peers; 1 on SQLite)
  PEERS_GOCHATD_CONCURRENCY  ``--concurrency`` per daemon (100: a no-op job costs nothing,
                             so a bigger claim batch per round trip)
PostgreSQL keeps the server defaults (fsync=on, synchronous_commit=on).
"""

from __future__ import annotations

import os
import subprocess
import sys
from collections.abc import AsyncIterator, Iterator
from contextlib import asynccontextmanager, contextmanager
from typing import Any

from benchmarks.peers.adapters import contract

MODE = os.environ.get("PEERS_GOCHATD_MODE", "streams")
if MODE not in ("streams", "polling", "sqlite"):
    raise SystemExit(f"PEERS_GOCHATD_MODE={MODE!r}: expected streams, polling or sqlite")
PROCS = int(os.environ.get("PEERS_GOCHATD_PROCS", "1" if MODE == "sqlite" else "2"))
CONCURRENCY = int(os.environ.get("PEERS_GOCHATD_CONCURRENCY", "100"))
DATABASE = {"streams": "bench_gochatd", "polling": "bench_gochatd_polling"}.get(MODE)
REDIS_URL = contract.redis_url(8) if MODE == "streams" else ""
PRODUCER = os.environ.get("PEERS_GOCHATD_PRODUCER", "async")
if PRODUCER not in ("async", "sync"):
    raise SystemExit(f"PEERS_GOCHATD_PRODUCER={PRODUCER!r}: expected async or sync")


def _database_url() -> str:
    if DATABASE is not None:
        return f"{contract.PG_SERVER}/{DATABASE}"
    run_dir = os.environ.get("PEERS_RUN_DIR") or os.getcwd()
    return f"sqlite:///{os.path.abspath(os.path.join(run_dir, 'gochatd-bench.db'))}"


class GochatdAdapter:
    name = "gochatd"
    backend = "trio"

    def describe(self) -> dict[str, str]:
        where = {"streams": "PostgreSQL + Redis Streams", "polling": "PostgreSQL, no Redis",
                 "sqlite": "SQLite file, no Redis"}[MODE]
        durability = (
            "SQLite file (WAL) on local disk, committed before the enqueue returns"
            if MODE == "sqlite" else
            f"PostgreSQL `{DATABASE}`, server defaults (fsync=on, synchronous_commit=on); every state "
            "change is a fenced, committed UPDATE" + ("; Redis only carries dispatch hints"
                                                     if MODE == "streams" else "")
        )
        return {
            "system": f"gochatd ({MODE}, {PROCS} process{'es' if PROCS > 1 else ''})",
            "version": f"{contract.version_of('gochatd')} (this checkout; redis-py "
                       f"{contract.version_of('redis')}, psycopg {contract.version_of('psycopg')})",
            "workers": f"{PROCS} x `gochatd serve --handlers benchmarks.peers.adapters.gochatd_handlers "
                       f"--queues default=1 --concurrency {CONCURRENCY} --admin-listen off`, {where}, "
                       "log level warning, defaults otherwise",
            "producer": "`gochatd.Client(database_url, redis_url).enqueue(...)` on Trio "
                        "(one committed INSERT per call, then XADD when Redis is on)",
            "durability": durability,
        }

    def reset(self) -> None:
        if DATABASE is not None:
            contract.recreate_database(DATABASE)
        else:
            path = _database_url().removeprefix("sqlite:///")
            for suffix in ("", "-wal", "-shm"):
                if os.path.exists(path + suffix):
                    os.remove(path + suffix)
        if REDIS_URL:
            contract.flush_redis_db(REDIS_URL)
        subprocess.run([contract.bin_path("gochatd"), "db", "upgrade", "--database-url", _database_url()],
                       check=True, stdout=subprocess.DEVNULL, env=_daemon_env())

    @asynccontextmanager
    async def producer(self) -> AsyncIterator[contract.EnqueueAsync]:
        import gochatd

        async with gochatd.Client(_database_url(), REDIS_URL or None) as client:
            async def enqueue_one(idx: int, t_enq: float, phase: int) -> None:
                await client.enqueue("bench:noop", {"i": idx, "t": t_enq, "p": phase})

            yield enqueue_one

    def worker_commands(self) -> list[list[str]]:
        cmd = [contract.bin_path("gochatd"), "serve",
               "--handlers", "benchmarks.peers.adapters.gochatd_handlers", "--queues", "default=1",
               "--concurrency", str(CONCURRENCY), "--admin-listen", "off",
               "--database-url", _database_url(), "--redis-url", REDIS_URL]
        return [cmd] * PROCS


def _daemon_env() -> dict[str, str]:
    return dict(os.environ, GOCHAT_LOG_LEVEL="warning")


class GochatdSyncAdapter(GochatdAdapter):
    """The same daemons; the producer is ``gochatd.SyncClient``, one client shared by the
    contract's producer threads (a threaded web app)."""

    backend = None  # type: ignore[assignment]  # no event loop: contract.produce_sync

    def describe(self) -> dict[str, str]:
        info = super().describe()
        info["system"] = info["system"].replace("gochatd (", "gochatd, SyncClient (")
        info["producer"] = ("`gochatd.SyncClient(database_url, redis_url).enqueue(...)` shared by "
                            "the producer threads, no event loop (one committed INSERT per call, "
                            "then XADD when Redis is on)")
        return info

    @contextmanager  # type: ignore[override]
    def producer(self) -> Iterator[Any]:
        import gochatd

        with gochatd.SyncClient(_database_url(), REDIS_URL or None) as client:
            def enqueue_one(idx: int, t_enq: float, phase: int) -> None:
                client.enqueue("bench:noop", {"i": idx, "t": t_enq, "p": phase})

            yield enqueue_one


if __name__ == "__main__":
    os.environ["GOCHAT_LOG_LEVEL"] = "warning"
    sys.exit(contract.main(GochatdSyncAdapter() if PRODUCER == "sync" else GochatdAdapter()))
