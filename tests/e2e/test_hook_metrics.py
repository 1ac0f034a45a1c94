"""docs/hooks.md's metrics hook in a real daemon: a counter a handler module registers with
prometheus_client's default registry (a plain ``Counter(...)``) is served on the daemon's
own ``/metrics``, beside gochatd's families, each family once."""

from __future__ import annotations

import json
from collections import Counter
from pathlib import Path

import httpx
from prometheus_client.parser import text_string_to_metric_families

from tests.support.daemon_process import DaemonFactory, poll_until, run_cli

MODULE = '''
import prometheus_client

import gochatd

JOBS_TOTAL = prometheus_client.Counter("myapp_jobs", "Jobs seen by the hook",
                                       ["job_type", "result"])
# A name in gochatd's own space is not taken from the default registry.
SHADOW = prometheus_client.Gauge("gochatd_in_flight_shadow", "Not served")


@gochatd.after_job
def count(ctx: gochatd.JobContext, error: Exception | None) -> None:
    JOBS_TOTAL.labels(ctx.job_type, "ok" if error is None else "error").inc()
'''


def test_a_hooks_counter_reaches_metrics(tmp_path: Path, daemons: DaemonFactory) -> None:
    (tmp_path / "myapp").mkdir()
    (tmp_path / "myapp" / "__init__.py").write_text("")
    (tmp_path / "myapp" / "metrics_hooks.py").write_text(MODULE)
    env = {"GOCHAT_DATABASE_URL": f"sqlite:///{tmp_path / 'jobs.db'}", "GOCHAT_LOG_FORMAT": "json"}
    daemon = daemons.start("metrics", ["--handlers", "myapp.metrics_hooks"], env=env,
                           cwd=tmp_path)
    address = str(daemon.wait_for_event("admin_listening")["address"])
    for job_type, payload in (("sys:noop", "{}"), ("sys:noop", "{}"),
                              ("sys:fail", '{"retryable": false}')):
        done = run_cli(["enqueue", job_type, "--payload", payload], env, cwd=tmp_path)
        assert done.returncode == 0, done.stderr
        job_id = json.loads(done.stdout)["id"]
        daemon.wait_for_event("job_completed" if job_type == "sys:noop" else "job_dead",
                              lambda e, i=job_id: e.get("job_id") == i)

    def scraped() -> dict[tuple[str, str], float] | None:
        text = httpx.get(f"{address}/metrics", timeout=10, trust_env=False).text
        families = list(text_string_to_metric_families(text))
        names = Counter(f.name for f in families)
        assert all(n == 1 for n in names.values()), names  # nothing served twice
        assert "gochatd_in_flight" in names and "gochatd_in_flight_shadow" not in names
        assert "process_cpu_seconds" in names  # the default registry's own collectors
        seen = {(s.labels["job_type"], s.labels["result"]): s.value
                for f in families if f.name == "myapp_jobs" for s in f.samples
                if s.name == "myapp_jobs_total"}
        return seen if sum(seen.values()) == 3 else None

    seen = poll_until(scraped, timeout_s=30, what="the hook's counter on /metrics")
    assert seen == {("sys:noop", "ok"): 2.0, ("sys:fail", "error"): 1.0}
    assert daemon.stop() == 0
