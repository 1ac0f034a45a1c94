"""Per-tenant rate limits: GCRA, fleet-wide through one Lua script in Redis.

Each tenant has a "theoretical arrival time" (TAT) stored in Redis under
``gochat:gateway:rate:<tenant>``. A request of ``cost`` jobs is admitted when
``max(TAT, now) + cost·T - now <= burst·T`` (T = 1/rate), which lets ``burst`` jobs through at
once and then one every T. The script reads the Redis server's clock (``TIME``), so every
daemon in the fleet shares one clock and one bucket per tenant.

While Redis is not configured or unreachable, each process keeps the same buckets in memory
(``mode == "local"``): the fleet then admits up to N times the rate. ``probe`` (called once a
second by the gateway loop) switches back once Redis answers.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

import trio
from redis.exceptions import NoScriptError, RedisClusterException, RedisError

from gochatd.dispatch.redis_client import (
    RedisClient,
    check_cluster_url,
    close_client,
    connect,
    ping,
)
from gochatd.errors import ResourceClosed
from gochatd.io.handoff import Handoff

KEY_PREFIX = "gochat:gateway:rate:"
#: Redis answers in well under this on a healthy network; a slow one falls back to local.
REDIS_TIMEOUT_S = 0.5
_UNAVAILABLE = (RedisError, RedisClusterException, OSError, TimeoutError, ResourceClosed)

#: KEYS[1] tenant's TAT key; ARGV: interval (µs per job), burst (jobs), cost (jobs).
#: Returns {admitted (0/1), retry_after_us}.
GCRA_SCRIPT = """
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000000 + tonumber(t[2])
local interval = tonumber(ARGV[1])
local burst = tonumber(ARGV[2])
local cost = tonumber(ARGV[3])
local tat = tonumber(redis.call('GET', KEYS[1]) or now)
if tat < now then tat = now end
local new_tat = tat + interval * cost
local wait = new_tat - now - interval * burst
if wait > 0 then
  return {0, math.ceil(wait)}
end
redis.call('SET', KEYS[1], string.format('%.0f', new_tat), 'PX', math.ceil((new_tat - now) / 1000) + 1)
return {1, 0}
"""


@dataclass(frozen=True, slots=True)
class Decision:
    admitted: bool
    retry_after_s: float = 0.0

    @property
    def retry_after_header(self) -> str:
        """Whole seconds, rounded up, at least 1."""
        return str(max(1, math.ceil(self.retry_after_s)))


class LocalBuckets:
    """The same GCRA, per process, on Trio's clock."""

    def __init__(self) -> None:
        self._tat: dict[str, float] = {}

    def take(self, tenant: str, rate_per_s: float, burst: int, cost: int) -> Decision:
        now = trio.current_time()
        interval = 1.0 / rate_per_s
        tat = max(self._tat.get(tenant, now), now)
        new_tat = tat + interval * cost
        wait = new_tat - now - interval * burst
        if wait > 0:
            return Decision(False, wait)
        self._tat[tenant] = new_tat
        if len(self._tat) > 100_000:  # forget buckets that are full again
            self._tat = {t: v for t, v in self._tat.items() if v > now}
        return Decision(True)


class RateLimiter:
    def __init__(self, redis_url: str, *, cluster: bool = False) -> None:
        if redis_url and cluster:
            check_cluster_url(redis_url)
        self._url = redis_url
        self._cluster = cluster
        self._redis: Handoff[RedisClient] | None = None
        self._sha: str | None = None
        self.local = LocalBuckets()
        #: "redis" while the shared limiter answers, "local" otherwise.
        self.mode = "local"

    def _connect(self) -> RedisClient:
        """One connection (one Redis), or a cluster client: the tenant's one key is in one
        slot, so the script runs on that slot's master."""
        return connect(self._url, cluster=self._cluster, socket_timeout_s=REDIS_TIMEOUT_S,
                       connect_timeout_s=REDIS_TIMEOUT_S, client_name="gochatd-gateway")

    async def open(self) -> None:
        if not self._url:
            return
        self._redis = Handoff("gochatd-ratelimit", self._connect, close_client, size=2)
        self.mode = "redis"

    async def close(self) -> None:
        client, self._redis = self._redis, None
        if client is not None:
            with trio.CancelScope(shield=True):
                await client.close(timeout_s=2.0)

    async def take(self, tenant: str, rate_per_s: float, burst: int, cost: int) -> Decision:
        """Admit ``cost`` jobs of ``tenant`` or say how long to wait. Never raises for Redis
        trouble: the request is decided locally instead."""
        if rate_per_s <= 0:
            return Decision(True)
        if self.mode == "redis" and self._redis is not None:
            key, interval_us = KEY_PREFIX + tenant, round(1_000_000 / rate_per_s, 3)
            try:
                admitted, wait_us = await self._redis.run(
                    lambda r: self._evaluate(r, key, interval_us, burst, cost)
                )
                return Decision(bool(admitted), wait_us / 1_000_000)
            except _UNAVAILABLE:
                self.mode = "local"  # the gateway loop probes and switches back
        return self.local.take(tenant, rate_per_s, burst, cost)

    def _evaluate(self, r: RedisClient, key: str, interval_us: float, burst: int,
                  cost: int) -> tuple[int, int]:
        """Connection thread: EVALSHA, loading the script once when the server lacks it."""
        args: list[Any] = [interval_us, burst, cost]
        if self._sha is not None:
            try:
                result = r.evalsha(self._sha, 1, key, *args)
                return int(result[0]), int(result[1])
            except NoScriptError:
                pass
        self._sha = str(r.script_load(GCRA_SCRIPT))
        result = r.evalsha(self._sha, 1, key, *args)
        return int(result[0]), int(result[1])

    async def probe(self) -> None:
        """While local: switch back to Redis once it answers a PING."""
        if self.mode == "redis" or self._redis is None:
            return
        try:
            await self._redis.run(ping)
        except _UNAVAILABLE:
            return
        self.mode = "redis"

