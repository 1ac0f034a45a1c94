"""The gateway's per-process state: the key ring, the rate limiter, its metrics, and the
loop that probes Redis while the limiter runs locally."""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable
from dataclasses import dataclass
from typing import NoReturn

import trio
from prometheus_client import CollectorRegistry
from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily, Metric
from prometheus_client.registry import Collector

from gochatd.config.settings import Settings
from gochatd.gateway.keys import KeyRing
from gochatd.gateway.ratelimit import Decision, RateLimiter
from gochatd.obs.logs import get_logger

PROBE_INTERVAL_S = 1.0
#: Request outcomes counted per tenant (tenant ids come from the configured keys, a
#: bounded set; keys themselves are never labels).
OUTCOMES = ("created", "replayed", "conflict", "rate_limited", "invalid")


class Gateway:
    def __init__(self, settings: Settings, registry: CollectorRegistry) -> None:
        self.settings = settings
        self.keys = KeyRing(settings.gateway_keys)
        self.limiter = RateLimiter(settings.redis_url, cluster=settings.redis_cluster)
        self.counts: Counter[tuple[str, str]] = Counter()
        registry.register(_GatewayCollector(self))

    def apply(self, settings: Settings) -> None:
        """Reloadable: keys, default rate and burst, tenants' limits."""
        self.settings = settings
        self.keys = KeyRing(settings.gateway_keys)

    def limits(self, tenant: str) -> tuple[float, int]:
        """(rate_per_s, burst) of a tenant: its own, else the gateway defaults."""
        own = self.settings.tenants.get(tenant)
        rate = own.rate_per_s if own and own.rate_per_s is not None else (
            self.settings.gateway_rate_per_s)
        burst = own.burst if own and own.burst is not None else self.settings.gateway_burst
        return rate, burst

    async def admit(self, tenant: str, cost: int) -> Decision:
        rate, burst = self.limits(tenant)
        decision = await self.limiter.take(tenant, rate, burst, cost)
        if not decision.admitted:
            self.count(tenant, "rate_limited")
        return decision

    def count(self, tenant: str, outcome: str, n: int = 1) -> None:
        self.counts[(tenant, outcome)] += n


@dataclass(frozen=True, slots=True)
class ProbeResult:
    mode: str
    changed: bool


class GatewayProbe:
    """While the limiter runs locally (Redis down), probe Redis once a second."""

    def __init__(self, gateway: Gateway, *, worker_id: str) -> None:
        self._gateway = gateway
        self._log = get_logger(worker_id=worker_id)

    async def run_once(self) -> ProbeResult:
        limiter = self._gateway.limiter
        before = limiter.mode
        with trio.move_on_after(PROBE_INTERVAL_S):
            await limiter.probe()
        if limiter.mode != before:
            self._log.info("gateway_rate_limit_mode", mode=limiter.mode, previous=before)
        return ProbeResult(limiter.mode, limiter.mode != before)

    async def run(self, task_status: trio.TaskStatus[None] = trio.TASK_STATUS_IGNORED
                  ) -> NoReturn:
        task_status.started()
        while True:
            await trio.sleep(PROBE_INTERVAL_S)
            await self.run_once()


class _GatewayCollector(Collector):
    def __init__(self, gateway: Gateway) -> None:
        self._gateway = gateway

    def collect(self) -> Iterable[Metric]:
        mode = GaugeMetricFamily(
            "gochatd_gateway_rate_limit_mode",
            "1 for how tenant rate limits are enforced now: redis (fleet-wide) or local "
            "(per process, while Redis is down or not configured)", labels=["mode"])
        for name in ("redis", "local"):
            mode.add_metric([name], 1.0 if self._gateway.limiter.mode == name else 0.0)
        yield mode
        requests = CounterMetricFamily(
            "gochatd_gateway_requests", "Gateway job requests by tenant and outcome "
            "(a batch counts its jobs)", labels=["tenant", "outcome"])
        for (tenant, outcome), n in sorted(self._gateway.counts.items()):
            requests.add_metric([tenant, outcome], float(n))
        yield requests
