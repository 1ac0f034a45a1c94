"""The throughput charts cover the fleet: two daemons on one PostgreSQL (+ Redis Streams)
drain a batch of jobs between them, and GET /v1/stats/throughput on the first shows every
finish once, in the current minute (completed, retried and failed apart, per queue and per
job type), including the second daemon's, whose last counts its clean stop flushed."""

from __future__ import annotations

from typing import Any

from gochatd.loops.stats import FLUSH_S
from tests.admin.helpers import Stack, admin_worker
from tests.integration.helpers import make_registry, started_worker
from tests.support.harness import make_settings
from tests.support.wait import wait_until

COMPLETED = 30
FAILING = 4  # each retried once (max_attempts 2), then dead


def _total(body: dict[str, Any], key: str = "all") -> tuple[int, int, int]:
    [series] = [s for s in body["series"] if s["key"] == key]
    return (sum(p["completed"] for p in series["points"]),
            sum(p["retried"] for p in series["points"]),
            sum(p["failed"] for p in series["points"]))


async def test_a_drain_across_two_daemons_shows_in_the_throughput(
    pg_clean: str, redis_url: str
) -> None:
    stack = Stack("pg_redis", pg_clean, redis_url)
    async with admin_worker(stack) as a:
        settings_b = make_settings(pg_clean, redis_url)
        async with started_worker(settings_b, registry=make_registry()) as b:
            client = a.worker.client
            ids = [(await client.enqueue("sys:noop", {"i": i})).id for i in range(COMPLETED)]
            ids += [(await client.enqueue("sys:fail", {"retryable": True}, queue="low",
                                          max_attempts=2)).id for _ in range(FAILING)]
            for job_id in ids:
                await a.wait_job(job_id, "completed", "dead")
            owners = {(await a.job(i))["locked_by"] for i in ids}
            assert b.worker.worker_id in owners, "daemon B took none of the jobs"
        # B stopped cleanly: its last counts were flushed. A's come with its next flush.
        expected = (COMPLETED, FAILING, FAILING)

        async def charted() -> dict[str, Any] | None:
            body: dict[str, Any] = await a.get("/v1/stats/throughput")
            return body if _total(body) == expected else None

        body = await wait_until(charted, timeout_s=3 * FLUSH_S, what="every finish charted")
        assert body is not None and body["minutes"] == 60 and body["by"] is None
        points = body["series"][0]["points"]
        assert len(points) == 60 and points[-1]["minute"].endswith(":00Z")
        assert sorted(p["minute"] for p in points) == [p["minute"] for p in points]
        by_queue = await a.get("/v1/stats/throughput", params={"by": "queue", "minutes": 5})
        assert {s["key"] for s in by_queue["series"]} == {"default", "low"}
        assert _total(by_queue, "default") == (COMPLETED, 0, 0)
        assert _total(by_queue, "low") == (0, FAILING, FAILING)
        by_type = await a.get("/v1/stats/throughput", params={"by": "job_type", "minutes": 5})
        assert _total(by_type, "sys:noop") == (COMPLETED, 0, 0)
        assert _total(by_type, "sys:fail") == (0, FAILING, FAILING)
        # The finishes may straddle a minute: only the axis of the last one is checked here.
        last = await a.get("/v1/stats/throughput", params={"by": "job_type", "minutes": 1})
        assert all(len(s["points"]) == 1 for s in last["series"])
