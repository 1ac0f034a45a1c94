"""The gateway across a fleet of real daemons: one rate limit per tenant shared through
Redis (not one per daemon), the per-process fallback while Redis is down (visible in
metrics), and tenants.<id>.max_running held across daemons."""

from __future__ import annotations

import math
import uuid
from pathlib import Path
from typing import Any

import httpx
import trio
import yaml

from gochatd.gateway.keys import hash_key
from gochatd.gateway.settings import TenantLimits
from tests.admin.helpers import Stack, admin_worker, daemon_admin_url
from tests.gateway.helpers import KEY_A, KEY_B, KEYS, TENANT_A, auth, job_body
from tests.gateway.slot_handlers import counts
from tests.support.daemon_process import DaemonFactory, DaemonProcess
from tests.support.redis_server import RedisServer
from tests.support.wait import wait_until


def _config(path: Path, keys: dict[str, str], tenants: dict[str, Any]) -> Path:
    path.write_text(yaml.safe_dump({"gateway": {"keys": keys}, "tenants": tenants}))
    return path


async def _start(daemons: DaemonFactory, name: str, env: dict[str, str],
                 args: tuple[str, ...] = ()) -> tuple[DaemonProcess, str]:
    daemon = await trio.to_thread.run_sync(
        lambda: daemons.start(name, list(args), env=env, mode="streams"))
    return daemon, daemon_admin_url(daemon)


async def test_the_rate_limit_is_shared_by_two_daemons(
    pg_redis_stack: Stack, daemons: DaemonFactory, tmp_path: Path
) -> None:
    rate, burst = 1.0, 10
    tenant = f"rate-{uuid.uuid4().hex[:8]}"  # its own bucket in the shared Redis
    key = "gck_shared-rate-limit-test-key"

    config = _config(tmp_path / "gochatd.yaml", {hash_key(key): tenant},
                     {tenant: {"rate_per_s": rate, "burst": burst}})
    env = {"GOCHAT_DATABASE_URL": pg_redis_stack.database_url,
           "GOCHAT_REDIS_URL": pg_redis_stack.redis_url, "GOCHAT_LOG_FORMAT": "json",
           "GOCHAT_CONFIG": str(config)}
    _, url_a = await _start(daemons, "daemon-a", env)
    _, url_b = await _start(daemons, "daemon-b", env)
    admitted: dict[str, int] = {url_a: 0, url_b: 0}
    limited: list[str] = []
    async with httpx.AsyncClient(timeout=10.0) as http:
        started = trio.current_time()

        async def post(url: str, n: int) -> None:
            response = await http.post(f"{url}/v1/jobs", json=job_body(payload={"n": n}),
                                       headers=auth(key))
            if response.status_code == 201:
                admitted[url] += 1
            else:
                assert response.status_code == 429, response.text
                limited.append(response.headers["retry-after"])

        async with trio.open_nursery() as nursery:
            for n in range(40):
                nursery.start_soon(post, url_a if n % 2 else url_b, n)
        elapsed = trio.current_time() - started
        total = sum(admitted.values())
        # One bucket for the fleet: the burst plus what the rate refilled meanwhile. One
        # bucket per daemon would have admitted about twice the burst.
        assert burst <= total <= burst + math.ceil(elapsed * rate) + 1, (admitted, elapsed)
        assert total < 2 * burst
        assert len(limited) == 40 - total and all(v.isdigit() and int(v) >= 1 for v in limited)
        for url in (url_a, url_b):
            metrics = (await http.get(f"{url}/metrics")).text
            assert 'gochatd_gateway_rate_limit_mode{mode="redis"} 1.0' in metrics
            assert key not in metrics


async def test_local_limits_while_redis_is_down(
    pg_admin: str, own_redis: RedisServer
) -> None:
    stack = Stack("pg_redis", pg_admin, own_redis.url)
    limits = {TENANT_A: TenantLimits(rate_per_s=0.1, burst=2)}
    async with admin_worker(stack, gateway_keys=dict(KEYS), tenants=limits) as admin:
        async def mode(name: str) -> bool:
            text = (await admin.http.get("/metrics")).text
            return f'gochatd_gateway_rate_limit_mode{{mode="{name}"}} 1.0' in text

        assert await mode("redis")
        await admin.post("/v1/jobs", 201, json=job_body(), headers=auth(KEY_A))
        await trio.to_thread.run_sync(own_redis.stop)
        # Requests are still answered (no Redis wait per request), limited per process.
        statuses = []
        with trio.fail_after(5):
            for n in range(4):
                response = await admin.http.post("/v1/jobs", json=job_body(payload={"n": n}),
                                                 headers=auth(KEY_A))
                statuses.append(response.status_code)
        assert statuses == [201, 201, 429, 429], statuses
        assert await mode("local")
        await admin.post("/v1/jobs", 201, json=job_body(), headers=auth(KEY_B))
        # Redis back: the gateway returns to the shared limiter by itself.
        await trio.to_thread.run_sync(own_redis.start)
        await wait_until(lambda: mode("redis"), timeout_s=10, what="rate limit mode redis")


async def test_max_running_holds_across_two_daemons(
    pg_redis_stack: Stack, daemons: DaemonFactory, tmp_path: Path
) -> None:
    limited, free = "slots-limited", "slots-free"

    keys = {hash_key(KEY_A): limited, hash_key(KEY_B): free}
    config = _config(tmp_path / "gochatd.yaml", keys, {limited: {"max_running": 2}})
    env = {"GOCHAT_DATABASE_URL": pg_redis_stack.database_url,
           "GOCHAT_REDIS_URL": pg_redis_stack.redis_url, "GOCHAT_LOG_FORMAT": "json",
           "GOCHAT_CONFIG": str(config), "GOCHAT_WORKER_CONCURRENCY": "8",
           # Refused stream entries are acked; the jobs must start as slots free (the
           # tenant backlog loop), not at the next sweep, 30 s away.
           "GOCHAT_WORKER_REDIS_SWEEP_INTERVAL_S": "30",
           "GOCHAT_WORKER_POLL_INTERVAL_MAX_S": "0.1",
           "GOCHAT_WORKER_REDIS_BLOCK_TIMEOUT_S": "0.2"}
    args = ("--handlers", "tests.gateway.slot_handlers")
    _, url_a = await _start(daemons, "daemon-a", env, args)
    _, url_b = await _start(daemons, "daemon-b", env, args)
    folder = tmp_path / "slots"
    item = {"job_type": "test:slot", "payload": {"dir": str(folder), "seconds": 0.25}}
    async with httpx.AsyncClient(timeout=10.0) as http:
        for url, key, n in ((url_a, KEY_A, 6), (url_b, KEY_A, 6), (url_a, KEY_B, 6)):
            response = await http.post(f"{url}/v1/jobs:batch", json={"jobs": [item] * n},
                                       headers=auth(key))
            assert response.status_code == 200 and response.json()["created"] == n

        async def tenants() -> dict[str, dict[str, Any]]:
            body = (await http.get(f"{url_b}/v1/tenants")).json()
            return {t["tenant"]: t for t in body["tenants"]}

        peak = 0

        async def all_done() -> bool:
            nonlocal peak
            peak = max(peak, (await tenants())[limited]["running"])
            jobs = (await http.get(f"{url_a}/v1/jobs", params={"status": "completed"})).json()
            return len(jobs["jobs"]) == 18

        await wait_until(all_done, timeout_s=20, interval_s=0.05, what="18 jobs completed")
        assert peak <= 2
        observed = counts(folder, limited)
        assert len(observed) == 12 and max(observed) == 2, observed
        assert len(counts(folder, free)) == 6
        listed = await tenants()
        assert listed[limited]["max_running"] == 2 and listed[free]["max_running"] is None
        metrics = (await http.get(f"{url_a}/metrics")).text
        assert f'gochatd_tenant_running{{tenant="{limited}"}}' in metrics
