"""What the sustained-pressure scenarios share: a bulk producer at a steady rate, the
sessions that hold snapshots (REPEATABLE READ readers, an idle transaction), and the
figures every cell reports (throughput of a phase, enqueue->start percentiles, dead tuples
and relation sizes of ``background_jobs``, the daemons' RSS)."""

from __future__ import annotations

import math
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import psycopg
import trio

from benchmarks.chaos.database import ScenarioDb
from gochatd import Client
from gochatd.errors import GochatdError
from gochatd.new_job import NewJob

#: One ``enqueue_many`` per tick: a gateway's shape, and a rate a single thread can offer.
TICK_S = 0.05
MAX_BATCH = 10_000  # enqueue_many's limit

_TABLE_STATS = """
SELECT n_live_tup, n_dead_tup, n_tup_upd, n_tup_hot_upd,
       pg_relation_size('background_jobs'), pg_indexes_size('background_jobs'),
       autovacuum_count
FROM pg_stat_user_tables WHERE relname = 'background_jobs'"""


@dataclass
class Offered:
    #: (job id, the producer's wall clock just before the enqueue call that wrote it)
    jobs: list[tuple[int, float]] = field(default_factory=list)
    refused: int = 0
    #: How long each accepted ``enqueue_many`` call took (INSERT, commit, XADD), ms: the
    #: part of enqueue->start the producer's own call accounts for.
    calls_ms: list[float] = field(default_factory=list)


class BulkProducer:
    """``rate_per_s`` ``chaos:work`` jobs a second as one ``enqueue_many`` per tick, in a
    thread of its own, until stopped."""

    def __init__(self, db_url: str, redis_url: str | None, *, rate_per_s: float,
                 work_s: float = 0.0, queue: str = "default") -> None:
        self.db_url, self.redis_url = db_url, redis_url
        self.rate_per_s, self.work_s, self.queue = rate_per_s, work_s, queue
        self.out = Offered()
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._main, name="chaos-bulk", daemon=True)
        self.failure: BaseException | None = None

    def start(self) -> BulkProducer:
        self._thread.start()
        return self

    def stop(self, timeout_s: float = 60.0) -> Offered:
        self._stop.set()
        self._thread.join(timeout_s)
        if self._thread.is_alive() or self.failure is not None:
            raise RuntimeError(f"the bulk producer failed: {self.failure!r}")
        return self.out

    def _main(self) -> None:
        try:
            trio.run(self._produce)
        except BaseException as exc:  # reported by stop()
            self.failure = exc

    async def _produce(self) -> None:
        async with Client(self.db_url, self.redis_url or None) as client:
            t0, tick, due = trio.current_time(), 0, 0
            while not self._stop.is_set():
                tick += 1
                # What the rate owes by now: a slow call is made up by the next one.
                owed = math.floor(self.rate_per_s * (trio.current_time() - t0 + TICK_S)) - due
                if owed > 0:
                    due += await self._offer(client, min(owed, MAX_BATCH))
                await trio.sleep_until(max(trio.current_time(), t0 + tick * TICK_S))

    async def _offer(self, client: Client, size: int) -> int:
        at = time.time()
        try:
            results = await client.enqueue_many(
                [NewJob("chaos:work", {"work_s": self.work_s}, queue=self.queue)
                 for _ in range(size)])
        except GochatdError:
            self.out.refused += size
        else:
            self.out.calls_ms.append((time.time() - at) * 1000)
            self.out.jobs.extend((r.job.id, at) for r in results)
        return size


class SnapshotHolders:
    """Sessions that hold back the xmin horizon: ``readers`` REPEATABLE READ transactions
    that keep reading, staggered so they overlap (each reopened after ``hold_s``), or
    (``idle=True``) one transaction that took a transaction id and then sits idle."""

    def __init__(self, url: str, *, readers: int, hold_s: float, idle: bool = False) -> None:
        self.url, self.readers, self.hold_s, self.idle = url, readers, hold_s, idle
        self._conns: list[psycopg.Connection[Any] | None] = [None] * readers
        self._opened: list[float] = [0.0] * readers
        self._t0 = 0.0
        self.snapshots_opened = 0

    def start(self) -> None:
        self._t0 = time.monotonic()
        self.tick()

    def _open(self, i: int) -> None:
        conn = psycopg.connect(self.url, autocommit=True)  # BEGIN below opens the one transaction
        if self.idle:
            conn.execute("BEGIN")
            conn.execute("SELECT txid_current()").fetchone()
        else:
            conn.execute("BEGIN ISOLATION LEVEL REPEATABLE READ")
            conn.execute("SELECT count(*) FROM background_jobs").fetchone()
        self._conns[i] = conn
        self._opened[i] = time.monotonic()
        self.snapshots_opened += 1

    def tick(self) -> None:
        """Open the readers due by now (reader i starts i/readers of a hold after the
        first), reopen those held for ``hold_s``, and let the others read (a cheap query
        in their snapshot: an active reader, not an idle one)."""
        now = time.monotonic()
        for i in range(self.readers):
            conn = self._conns[i]
            if conn is None:
                if now - self._t0 >= i * self.hold_s / self.readers:
                    self._open(i)
            elif not self.idle and now - self._opened[i] >= self.hold_s:
                conn.close()  # the snapshot ends (rolled back)
                self._open(i)
            elif not self.idle:
                conn.execute("SELECT count(*) FROM chaos_effects").fetchone()

    def stop(self) -> None:
        for conn in self._conns:
            if conn is not None:
                conn.close()
        self._conns = [None] * self.readers


def table_stats(db: ScenarioDb) -> dict[str, float]:
    rows = db.query(_TABLE_STATS)
    live, dead, upd, hot, heap, idx, autovac = rows[0] if rows else (0,) * 7
    return {"n_live_tup": float(live), "n_dead_tup": float(dead),
            "hot_update_pct": round(100.0 * hot / upd, 1) if upd else 0.0,
            "table_mb": round(heap / 2**20, 1), "indexes_mb": round(idx / 2**20, 1),
            "autovacuum_count": float(autovac)}


_STATEMENTS_LOADED = """
SELECT 1 FROM pg_settings
WHERE name = 'shared_preload_libraries' AND strpos(setting, 'pg_stat_statements') > 0"""

#: The statements that took the most database time: normalised text without its comments
#: (parameters are $n, never values), calls, time and buffers per call.
_TOP_STATEMENTS = """
SELECT left(regexp_replace(regexp_replace(query, '--[^\\n]*', '', 'g'), '\\s+', ' ', 'g'), 120),
       calls,
       round(total_exec_time::numeric, 1), round(mean_exec_time::numeric, 3),
       round((shared_blks_hit + shared_blks_read)::numeric / greatest(calls, 1), 1)
FROM pg_stat_statements WHERE dbid = (SELECT oid FROM pg_database
                                      WHERE datname = current_database())
ORDER BY total_exec_time DESC LIMIT %s"""


def reset_statements(db: ScenarioDb) -> bool:
    """Start a phase's statement figures afresh; False when ``pg_stat_statements`` is not
    loaded (``--pg-set shared_preload_libraries=pg_stat_statements``)."""
    if not db.query(_STATEMENTS_LOADED):
        return False
    db.query("CREATE EXTENSION IF NOT EXISTS pg_stat_statements")
    db.query("SELECT pg_stat_statements_reset()")
    return True


def top_statements(db: ScenarioDb, limit: int = 8) -> list[dict[str, Any]]:
    return [{"query": q, "calls": int(c), "total_ms": float(t), "mean_ms": float(m),
             "blocks_per_call": float(b)}
            for q, c, t, m, b in db.query(_TOP_STATEMENTS, [limit])]


def rss_mb(pids: list[int]) -> float:
    """The largest resident set of these processes now (MiB; 0 for one that is gone)."""
    worst = 0.0
    for pid in pids:
        try:
            text = Path(f"/proc/{pid}/status").read_text()
        except OSError:
            continue
        for line in text.splitlines():
            if line.startswith("VmRSS:"):
                worst = max(worst, int(line.split()[1]) / 1024)
    return round(worst, 1)


def percentile(values: list[float], p: float) -> float:
    if not values:
        return 0.0
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, max(0, math.ceil(p / 100 * len(ordered)) - 1))]


def completed_between(db: ScenarioDb, t0: float, t1: float) -> int:
    """Executions that ended ``ok`` in [t0, t1) (wall clock of this host)."""
    return int(db.executions(
        "SELECT count(*) FROM chaos_executions WHERE outcome = 'ok'"
        " AND ended_at >= %s AND ended_at < %s", [t0, t1])[0][0])


def start_latencies_ms(db: ScenarioDb, offered: list[tuple[int, float]]) -> list[float]:
    """Enqueue (the producer's clock before the call) -> first start, per job, in ms."""
    if not offered:
        return []
    ids = [job_id for job_id, _ in offered]
    starts = dict(db.executions(
        "SELECT job_id, min(started_at) FROM chaos_executions WHERE job_id = ANY(%s)"
        " GROUP BY job_id", [ids]))
    return [(float(starts[j]) - at) * 1000 for j, at in offered if j in starts]
