"""What the dashboard says agrees with the database, in a real headless Chromium against real
``gochatd`` processes on SQLite and PostgreSQL: the count cards and the queue rows split
queued the same way (due now / scheduled), the chart's window starts where the data does,
and a daemon killed with SIGKILL shows as lost with the job it still holds."""

from __future__ import annotations

import re

import httpx
from playwright.sync_api import expect

from tests.browser.support import Dash, Harness, add_past_counts

#: A queue no daemon serves: its jobs stay queued.
PARKED = "parked"
#: A lost daemon is one whose heartbeat is older than loops/fleet.ALIVE_S (15 s).
LOST_MS = 40_000


def _int(dash: Dash, testid: str) -> int:
    return int(dash.testid(testid).inner_text().replace(",", ""))


def test_the_count_cards_and_the_queue_rows_agree(dash: Dash) -> None:
    due = dash.enqueue("sys:noop", [{"n": i} for i in range(2)], queue=PARKED)
    later = dash.enqueue("sys:noop", [{"n": i} for i in range(3)], queue=PARKED, delay_s=3600)
    [failing] = dash.enqueue("sys:fail", [{"message": "upstream timed out"}])
    dash.wait_job(failing, "retrying")  # waits a day for its next attempt (SLOW_RETRIES)
    dash.refresh()

    expect(dash.testid(f"queue-queued-{PARKED}")).to_have_text(str(len(due)))
    expect(dash.testid(f"queue-delayed-{PARKED}")).to_have_text(str(len(later)))
    expect(dash.testid("count-queued")).to_have_text(str(len(due)))  # due now, as the rows
    expect(dash.testid("count-delayed")).to_have_text(str(len(later)))
    expect(dash.testid("count-retrying")).to_have_text("1")
    expect(dash.testid("tab-count-scheduled")).to_have_text("4")  # the tab lists the retry too
    rows = dash.page.locator("#queues-body tr")
    for column in ("queued", "delayed", "retrying"):
        summed = sum(int(rows.nth(i).get_by_test_id(re.compile(f"^queue-{column}-")).inner_text())
                     for i in range(rows.count()))
        assert summed == _int(dash, f"count-{column}"), column
    cards = ("queued", "delayed", "running", "retrying", "completed", "dead", "cancelled")
    assert sum(_int(dash, f"count-{c}") for c in cards) == _int(dash, "count-total") == 6


def test_the_chart_window_starts_with_the_data(dash: Dash) -> None:
    done = dash.enqueue("sys:noop", [{"n": i} for i in range(12)])
    for job_id in done:
        dash.wait_job(job_id, "completed")
    dash.refresh()
    # A young daemon: the whole chart is the last 5 minutes, not an hour with a spike at the end.
    expect(dash.testid("chart-total-completed")).to_have_text("12")
    expect(dash.testid("chart-window")).to_have_text("last 5 minutes")
    expect(dash.testid("chart-svg")).to_have_attribute("data-minutes", "5")

    add_past_counts(dash.db_url, 20, "default", "sys:noop", completed=30, failed=2)
    dash.refresh()
    expect(dash.testid("chart-total-completed")).to_have_text("42")
    # From that minute to now (22 if a minute turned meanwhile).
    expect(dash.testid("chart-window")).to_have_text(re.compile(r"^last 2[12] minutes$"))
    add_past_counts(dash.db_url, 59, "default", "sys:noop", completed=1)
    dash.refresh()
    expect(dash.testid("chart-total-completed")).to_have_text("43")
    expect(dash.testid("chart-window")).to_have_text("last hour")
    expect(dash.testid("chart-svg")).to_have_attribute("data-minutes", "60")


def test_a_killed_daemon_is_lost_with_the_job_it_held(harness: Harness, db_url: str) -> None:
    dash = harness.open(db_url)
    dash.post("/v1/pause")  # this daemon claims nothing: the other one takes the job
    victim, victim_base = harness.start_daemon(db_url, {"GOCHAT_WORKER_LEASE_S": "600"})
    victim_id = httpx.get(victim_base + "/v1/status", timeout=10).json()["worker_id"]
    [held] = dash.enqueue("sys:sleep", [{"seconds": 300}])
    assert dash.wait_job(held, "running")["locked_by"] == victim_id
    dash.tab("fleet")
    expect(dash.testid(f"fleet-state-{victim_id}")).to_have_text("active")
    expect(dash.testid(f"fleet-in-flight-{victim_id}")).to_have_text("1")

    victim.kill9()  # no clean stop: its fleet row stays, its heartbeat ages
    expect(dash.testid(f"fleet-state-{victim_id}")).to_have_text("lost", timeout=LOST_MS)
    # The row's in_flight is its last heartbeat's; the page shows what the database holds.
    [row] = [d for d in dash.get("/v1/fleet")["daemons"] if d["id"] == victim_id]
    assert (row["alive"], row["in_flight"]) == (False, 1)
    expect(dash.testid(f"fleet-held-{victim_id}")).to_have_text("1 held")
    expect(dash.testid("fleet-summary")).to_contain_text("1 alive of 2 · 1 lost")
    expect(dash.testid(f"fleet-drain-{victim_id}")).to_be_disabled()
    dash.testid(f"fleet-held-job-{held}").click()
    expect(dash.testid("detail-title")).to_have_text(f"Job {held}")
    expect(dash.testid("detail-status")).to_have_text("running")
    expect(dash.testid("detail-fields")).to_contain_text(victim_id)

