"""The dashboard's tabs in a real headless Chromium against a real ``gochatd`` process, on
SQLite and on PostgreSQL: Busy (elapsed time, cancel), Tenants (limits and usage), Periodic
(next runs, last slot), and the tabs' counts."""

from __future__ import annotations

import json

from playwright.sync_api import expect

from tests.browser.support import TIMEOUT_S, Harness, job_status
from tests.support.daemon_process import poll_until

TENANTS = {"acme": {"max_running": 2, "rate_per_s": 50, "burst": 100}, "globex": {}}
PERIODIC = {"sys:noop": {"every": "1s", "tenant_id": "acme", "queue": "low"}}


def test_busy_tenants_and_periodic(harness: Harness, db_url: str) -> None:
    dash = harness.open(db_url, {"GOCHAT_TENANTS": json.dumps(TENANTS),
                                 "GOCHAT_PERIODIC": json.dumps(PERIODIC),
                                 "GOCHAT_WORKER_QUEUE_LIMITS": "low=2",
                                 "GOCHAT_WORKER_QUEUE_RATES": "low=100/s",
                                 "GOCHAT_WORKER_SHUTDOWN_GRACE_S": "1"})
    expect(dash.testid("queue-limit-low")).to_have_text("2")  # worker.queue_limits
    expect(dash.testid("queue-limit-default")).to_have_text("—")
    expect(dash.testid("queue-rate-low")).to_have_text("100/s")  # worker.queue_rates
    expect(dash.testid("queue-rate-default")).to_have_text("—")

    # Busy: a running job with its worker and a growing elapsed time; cancel it from there.
    [sleeper] = dash.enqueue("sys:sleep", [{"seconds": 60}], tenant_id="acme")
    dash.wait_job(sleeper, "running")
    dash.refresh()
    expect(dash.testid("tab-count-busy")).to_have_text("1")
    dash.tab("busy")
    row = dash.testid(f"busy-row-{sleeper}")
    expect(row).to_contain_text("sys:sleep")
    expect(row).to_contain_text(dash.get("/v1/status")["worker_id"])
    elapsed = dash.testid(f"busy-elapsed-{sleeper}")
    first = elapsed.text_content() or ""
    assert first.endswith("s"), first
    expect(elapsed).not_to_have_text(first)  # the clock runs

    # Tenants: acme runs 1 of its 2, globex has no limit.
    dash.tab("tenants")
    expect(dash.testid("tenant-running-acme")).to_have_text("1")
    expect(dash.testid("tenant-max-acme")).to_have_text("2")
    expect(dash.testid("tenant-row-acme")).to_contain_text("50")
    expect(dash.testid("tenant-max-globex")).to_have_text("no limit")

    dash.tab("busy")
    dash.testid(f"busy-cancel-{sleeper}").click()
    expect(dash.message("info", f"Cancel requested for job {sleeper}")).to_be_visible()
    poll_until(lambda: job_status(dash.db_url, sleeper) == "cancelled", timeout_s=TIMEOUT_S,
               what="the running job to be cancelled in the database")
    dash.refresh()
    expect(dash.testid(f"busy-row-{sleeper}")).to_have_count(0)
    expect(dash.testid("busy-empty")).to_be_visible()
    dash.tab("tenants")
    expect(dash.testid("tenant-running-acme")).to_have_text("0")

    # Periodic: the every-second job, its schedule, its last slot and next runs.
    dash.tab("periodic")
    row = dash.testid("periodic-row-sys:noop")
    expect(row).to_contain_text("every 1s")
    expect(row).to_contain_text("acme")
    expect(row).to_contain_text("low")
    expect(dash.testid("periodic-next-sys:noop")).to_contain_text("in ")
    listed = dash.get("/v1/periodic")
    [item] = [p for p in listed["periodic"] if p["job_type"] == "sys:noop"]
    assert len(item["next_runs"]) == 3
    poll_until(lambda: dash.get("/v1/periodic")["periodic"][0]["last_slot"], timeout_s=TIMEOUT_S,
               what="a periodic slot")
    dash.refresh()
    expect(row).not_to_contain_text("never")
