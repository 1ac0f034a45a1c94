"""A pgbouncer process owned by a test (benchmarks/pgbouncer.py, shared with the chaos
runner and the bench)."""

from benchmarks.pgbouncer import PgBouncer, pgbouncer_binary

__all__ = ["PgBouncer", "pgbouncer_binary"]
