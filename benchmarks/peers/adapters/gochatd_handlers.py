"""The no-op handler the benchmarked gochatd daemons load (``--handlers`` this module)."""

import gochatd
from benchmarks.peers.adapters.contract import record_start


@gochatd.job("bench:noop", queue="default", max_attempts=3)
async def noop(ctx: gochatd.JobContext) -> None:
    record_start(ctx.payload["i"], ctx.payload["t"], ctx.payload["p"])
