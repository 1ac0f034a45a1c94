"""A picture of each dashboard tab with realistic data, saved to docs/screenshots/ (shown by
docs/operations.md): two daemons on one PostgreSQL database (and a third, killed with SIGKILL
while it ran an export, shown as lost with the job it holds), a drain of 150 jobs over three
queues and tenants, jobs that died and wait to retry, scheduled jobs, running jobs, periodic
jobs, tenants with limits and a reply the provider refused. Each picture is taken once its
tab shows what the API says.

The throughput chart also shows the 35 minutes before the run: per-minute counter rows
(``gochatd_job_counts``, what the daemons' flushes write) added for those minutes, so the
picture is that of a fleet that has been busy for a while rather than of one a few seconds
old; the page reads and draws them as any other. Only the chart counts them: the jobs of
those minutes are not in the table (the count cards show this run's jobs).

The pictures go to artifacts/screenshots/ (ignored by git), so an ordinary run leaves the
tree clean; ``GOCHAT_UPDATE_SCREENSHOTS=1`` writes them over docs/screenshots/ instead, to
refresh the docs."""

from __future__ import annotations

import json
import math
import os
import re
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest
from playwright.sync_api import expect

from tests.browser.support import REPO_ROOT, TIMEOUT_S, Dash, Harness
from tests.support.daemon_process import poll_until
from tests.support.e2e_jobs import query
from tests.support.webhook_receiver import Answer, WebhookReceiver

SHOTS = (REPO_ROOT / "docs" / "screenshots" if os.environ.get("GOCHAT_UPDATE_SCREENSHOTS") == "1"
         else REPO_ROOT / "artifacts" / "screenshots")
TENANTS = {"acme": {"max_running": 4, "rate_per_s": 50, "burst": 100},
           "globex": {"max_running": 2}, "initech": {}}
PERIODIC = {
    "sys:noop": {"every": "1m", "tenant_id": "acme", "queue": "low"},
    "reports:nightly": {"cron": "0 3 * * *", "tz": "Europe/Berlin", "catch_up": "latest"},
}
DRAIN = [("default", "acme"), ("high", "globex"), ("low", "initech")]
#: Minutes of history before the run, in the chart only.
HISTORY_MINUTES = 35


def history(minutes_ago: int) -> dict[tuple[str, str], tuple[int, int, int]]:
    """One past minute's finishes per (queue, job type): (completed, failed, retried). A
    working day's wave with some noise, the same on every run."""
    wave = 1 + math.sin(minutes_ago / 5.5)
    noise = (minutes_ago * 37) % 11
    return {
        ("default", "sys:noop"): (int(40 + 30 * wave + 2 * noise), 0, 0),
        ("high", "mail:send"): (int(18 + 12 * (2 - wave) + noise), noise % 4 // 3,
                                 (noise + minutes_ago) % 5),
        ("low", "report:build"): (int(6 + 4 * wave), 1 if minutes_ago % 9 == 4 else 0,
                                  1 if minutes_ago % 7 == 2 else 0),
    }


def seed_history(db_url: str) -> tuple[int, int, int]:
    """The history's counter rows; its totals (completed, failed, retried)."""
    totals = [0, 0, 0]
    rows: list[tuple[int, str, str, int, int, int]] = []
    for minutes_ago in range(1, HISTORY_MINUTES + 1):
        for (queue, job_type), counts in history(minutes_ago).items():
            rows.append((minutes_ago, queue, job_type, *counts))
            totals = [t + c for t, c in zip(totals, counts, strict=True)]
    # One statement, so one now(): row by row, the minute could turn between two rows and
    # two "minutes ago" would name the same minute (a duplicate key).
    values = ", ".join(["(%s::int, %s, %s, %s::int, %s::int, %s::int)"] * len(rows))
    query(db_url, "INSERT INTO gochatd_job_counts (minute, queue, job_type, completed, failed, "
                  "retried) SELECT date_trunc('minute', now()) - make_interval(mins => v.m), "
                  f"v.q, v.t, v.c, v.f, v.r FROM (VALUES {values}) AS v(m, q, t, c, f, r)",
          tuple(x for row in rows for x in row))
    return totals[0], totals[1], totals[2]


@pytest.fixture
def receiver() -> Iterator[WebhookReceiver]:
    server = WebhookReceiver().start()
    server.script = [Answer(400)]
    yield server
    server.stop()


def shoot(dash: Dash, name: str) -> Path:
    dash.page.evaluate("window.scrollTo(0, 0)")
    dash.page.mouse.move(0, 0)  # no hover highlight in the picture
    path = SHOTS / f"dashboard-{name}.png"
    dash.page.screenshot(path=str(path), full_page=True)
    assert path.stat().st_size > 20_000, path
    return path


def seed(dash: Dash) -> dict[str, list[int]]:
    """The jobs the pictures show; waits until each is where it belongs. (test:fail_once's
    marker is relative: to the daemon's working directory, the test's tmp_path.)"""
    ids: dict[str, list[int]] = {"drained": []}
    for n, (queue, tenant) in enumerate(DRAIN):
        ids["drained"] += dash.enqueue(
            "sys:noop", [{"order_id": 10_000 + 50 * n + i} for i in range(50)], queue=queue,
            tenant_id=tenant)
    ids["dead"] = dash.enqueue("test:fail_once", [
        {"marker": f"dead-{i}.marker", "customer": {"id": 4200 + i}} for i in range(3)
    ], tenant_id="globex")
    ids["retrying"] = dash.enqueue("sys:fail", [{"message": "upstream timed out"}] * 2,
                                   queue="high", tenant_id="acme")
    ids["scheduled"] = dash.enqueue("sys:noop", [{"reminder": "invoice 2024-118 due"}],
                                    delay_s=3600, tenant_id="acme")
    ids["scheduled"] += dash.enqueue("sys:sleep", [{"seconds": 1}], delay_s=7200,
                                     tenant_id="initech", queue="low")
    ids["running"] = dash.enqueue("sys:sleep", [{"seconds": 300}] * 2, tenant_id="acme")
    for job_id in ids["drained"]:
        dash.wait_job(job_id, "completed")
    for job_id in ids["dead"]:
        dash.wait_job(job_id, "dead")
    for job_id in ids["retrying"]:
        dash.wait_job(job_id, "retrying")
    for job_id in ids["running"]:
        dash.wait_job(job_id, "running")
    return ids


def kill_an_exporter(harness: Harness, dash: Dash, env: dict[str, str]) -> tuple[str, int]:
    """A third daemon, the only one reading queue ``exports``, killed with SIGKILL while it
    runs an export (its lease is long: the reaper leaves it for the whole test). Its id
    and the job's."""
    daemon, base = harness.start_daemon(dash.db_url, {
        **env, "GOCHAT_WORKER_QUEUES": "exports=1", "GOCHAT_WORKER_LEASE_S": "3600"})
    worker_id = str(httpx.get(base + "/v1/status", timeout=10).json()["worker_id"])
    [export] = dash.enqueue("sys:sleep", [{"seconds": 900, "export": "orders-2026-11.csv"}],
                            queue="exports", tenant_id="initech")
    assert dash.wait_job(export, "running")["locked_by"] == worker_id

    def beat_with_the_export() -> bool:
        rows = [d for d in dash.get("/v1/fleet")["daemons"] if d["id"] == worker_id]
        return bool(rows) and (rows[0]["mode"], rows[0]["in_flight"]) == ("polling", 1)

    poll_until(beat_with_the_export, timeout_s=TIMEOUT_S, what="a heartbeat with the export")
    daemon.kill9()
    return worker_id, export


def test_screenshot_of_each_tab(harness: Harness, pg_clean: str, receiver: WebhookReceiver) -> None:
    SHOTS.mkdir(parents=True, exist_ok=True)
    env = {"GOCHAT_TENANTS": json.dumps(TENANTS), "GOCHAT_PERIODIC": json.dumps(PERIODIC),
           "GOCHAT_WORKER_SHUTDOWN_GRACE_S": "1", "GOCHAT_WORKER_QUEUE_LIMITS": "low=2",
           "GOCHAT_OUTBOX_CHANNELS": json.dumps({"whatsapp": {"url": receiver.url}}),
           "GOCHAT_OUTBOX_POLL_S": "0.1"}
    query(pg_clean, "DELETE FROM gochatd_queue_pauses")
    dash = harness.open(pg_clean, env, viewport=(1360, 860))
    harness.start_daemon(pg_clean, env)  # a second daemon: the fleet has two
    lost, export = kill_an_exporter(harness, dash, env)
    completed, failed, retried = seed_history(pg_clean)
    ids = seed(dash)
    query(pg_clean, "INSERT INTO reply_outbox (tenant_id, job_id, channel, recipient, body, "
                    "dedupe_key) VALUES ('acme', %s, 'whatsapp', '+15550100', "
                    "'{\"text\": \"Your order shipped\"}', 'order-10001-shipped')",
          (ids["drained"][1],))
    poll_until(lambda: dash.get("/v1/outbox?status=dead")["messages"], timeout_s=TIMEOUT_S,
               what="the refused reply to be dead")
    dash.refresh()

    expect(dash.testid("queue-queued-default")).to_have_text("0")
    expect(dash.testid("tab-count-dead")).to_have_text("3")
    expect(dash.testid("tab-count-retries")).to_have_text("2")
    expect(dash.testid("tab-count-busy")).to_have_text("3")  # 2 + the lost daemon's export
    # 150 drained, and the periodic sys:noop's slots (one a minute) on top.
    expect(dash.testid("count-completed")).to_have_text(re.compile(r"^15[0-9]$"))
    expect(dash.testid("count-dead")).to_have_text("3")
    expect(dash.testid("count-delayed")).to_have_text("2")  # the retrying two: under Retrying
    expect(dash.testid("tab-count-scheduled")).to_have_text("4")  # 2 delayed + 2 retrying
    # 150 drained and the periodic slots, on top of the history.
    totals = "|".join(f"{completed + n:,}" for n in range(150, 160))
    expect(dash.testid("chart-total-completed")).to_have_text(re.compile(f"^({totals})$"))
    expect(dash.testid("chart-total-failed")).to_have_text(f"{failed + 3:,}")
    expect(dash.testid("chart-total-retried")).to_have_text(f"{retried + 2:,}")
    # From the history's first minute to now (one more if a minute turned meanwhile).
    expect(dash.testid("chart-window")).to_have_text(re.compile(r"^last 3[67] minutes$"))
    shoot(dash, "overview")

    dash.tab("fleet")
    expect(dash.page.locator("#fleet-body tr")).to_have_count(3)
    expect(dash.testid(f"fleet-state-{lost}")).to_have_text("lost", timeout=40_000)
    expect(dash.testid(f"fleet-held-job-{export}")).to_be_visible()
    expect(dash.testid("fleet-summary")).to_contain_text("2 alive of 3 · 1 lost")
    shoot(dash, "fleet")

    dash.tab("busy")
    for job_id in ids["running"]:
        expect(dash.testid(f"busy-row-{job_id}")).to_be_visible()
    shoot(dash, "busy")

    dash.tab("scheduled")
    for job_id in ids["scheduled"]:
        expect(dash.testid(f"scheduled-row-{job_id}")).to_be_visible()
    shoot(dash, "scheduled")

    dash.tab("retries")
    for job_id in ids["retrying"]:
        expect(dash.testid(f"retries-row-{job_id}")).to_be_visible()
    shoot(dash, "retries")

    dash.tab("dead")
    for job_id in ids["dead"]:
        expect(dash.testid(f"dead-row-{job_id}")).to_be_visible()
    shoot(dash, "dead")

    dash.tab("periodic")
    expect(dash.testid("periodic-row-reports:nightly")).to_contain_text("cron 0 3 * * *")
    shoot(dash, "periodic")

    dash.tab("tenants")
    expect(dash.testid("tenant-running-acme")).to_have_text("2")
    shoot(dash, "tenants")

    dash.tab("outbox")
    expect(dash.testid("outbox-summary")).to_contain_text("1 dead")
    shoot(dash, "outbox")

    dash.tab("jobs")
    expect(dash.page.locator("#jobs-body tr")).to_have_count(50)
    shoot(dash, "jobs")

    dead = ids["dead"][0]
    dash.tab("dead")
    dash.open_job(dash.testid(f"dead-row-{dead}"), dead)
    expect(dash.testid("detail-status")).to_have_text("dead")
    shoot(dash, "job")
