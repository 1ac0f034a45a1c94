"""The dashboard's fleet and stats views in a real headless Chromium against real
``gochatd`` processes, on SQLite and on PostgreSQL: the Scheduled tab (run now, delete),
charts and counts after a drain, search and newest first, and drain/pause/resume of another
daemon from the Fleet tab."""

from __future__ import annotations

import httpx
from playwright.sync_api import expect

from tests.browser.support import TIMEOUT_S, Dash, Harness
from tests.browser.test_dashboard_controls import gone_or
from tests.support.daemon_process import poll_until


def test_scheduled_run_now_and_delete(dash: Dash) -> None:
    soon, later = dash.enqueue("sys:noop", [{"reminder": "soon"}, {"reminder": "later"}],
                               delay_s=3600, tenant_id="acme")
    dash.refresh()
    expect(dash.testid("tab-count-scheduled")).to_have_text("2")
    dash.tab("scheduled")
    expect(dash.testid(f"scheduled-runs-at-{soon}")).to_contain_text("in 59m")
    expect(dash.testid(f"scheduled-status-{soon}")).to_have_text("queued")

    dash.testid(f"scheduled-run-now-{soon}").click()
    expect(dash.message("info", f"Job {soon} runs now")).to_be_visible()
    gone_or(dash, soon, "completed")
    dash.refresh()
    expect(dash.testid(f"scheduled-row-{soon}")).to_have_count(0)

    dash.testid(f"scheduled-delete-{later}").click()  # the confirmation is accepted
    expect(dash.message("info", f"Job {later} deleted")).to_be_visible()
    gone_or(dash, later, None)
    expect(dash.testid("scheduled-empty")).to_be_visible()
    expect(dash.testid("tab-count-scheduled")).to_have_text("0")


def test_charts_counts_and_search(dash: Dash) -> None:
    """A drain shows in the chart (all, per queue) and the counts add up; search finds a job
    by payload text, id and tenant; the list is newest first."""
    done = dash.enqueue("sys:noop", [{"n": i} for i in range(30)], queue="default")
    done += dash.enqueue("sys:noop", [{"n": i} for i in range(10)], queue="high", tenant_id="globex")
    [needle] = dash.enqueue("sys:noop", [{"invoice": "INV-77310", "note": "paid"}], tenant_id="acme")
    dead = dash.enqueue("test:fail_once", [{"marker": f"chart-{i}.marker"} for i in range(2)])
    [later] = dash.enqueue("sys:noop", [{}], delay_s=3600)
    for job_id in [*done, needle]:
        dash.wait_job(job_id, "completed")
    for job_id in dead:
        dash.wait_job(job_id, "dead")
    dash.refresh()

    expect(dash.testid("count-completed")).to_have_text("41")
    expect(dash.testid("count-dead")).to_have_text("2")
    expect(dash.testid("count-queued")).to_have_text("0")  # due now: the later one is not
    expect(dash.testid("count-delayed")).to_have_text("1")
    expect(dash.testid("count-total")).to_have_text("44")
    expect(dash.testid("chart-total-completed")).to_have_text("41")
    expect(dash.testid("chart-total-failed")).to_have_text("2")
    expect(dash.testid("chart-line-completed")).to_be_attached()
    dash.testid("chart-by").select_option("queue")
    expect(dash.testid("series-completed-default")).to_have_text("31")
    expect(dash.testid("series-completed-high")).to_have_text("10")
    expect(dash.testid("series-failed-default")).to_have_text("2")

    dash.tab("jobs")
    rows = dash.page.locator("#jobs-body tr")
    expect(rows.first).to_have_attribute("data-testid", f"job-row-{later}")  # newest first
    expect(dash.testid(f"job-scheduled-{later}")).to_contain_text("in 59m")
    search = dash.testid("search-input")
    search.fill("INV-77310")
    search.press("Enter")
    expect(rows).to_have_count(1)
    expect(dash.testid(f"job-row-{needle}")).to_be_visible()
    search.fill(str(dead[1]))
    search.press("Enter")
    expect(rows).to_have_count(1)
    expect(dash.testid(f"job-row-{dead[1]}")).to_be_visible()
    search.fill("globex")
    search.press("Enter")
    expect(rows).to_have_count(10)
    dash.testid("filter-order").select_option("oldest")
    expect(rows.first).to_have_attribute("data-testid", f"job-row-{done[30]}")


def test_fleet_pause_resume_and_drain_another_daemon(harness: Harness, db_url: str) -> None:
    dash = harness.open(db_url)
    _, other_base = harness.start_daemon(db_url)
    me = dash.get("/v1/status")["worker_id"]
    with httpx.Client(base_url=other_base, timeout=10) as other:
        them = other.get("/v1/status").json()["worker_id"]
        dash.tab("fleet")
        expect(dash.page.locator("#fleet-body tr")).to_have_count(2)
        expect(dash.testid(f"fleet-row-{me}")).to_contain_text("(this)")
        expect(dash.testid(f"fleet-state-{them}")).to_have_text("active")
        expect(dash.testid("fleet-summary")).to_contain_text("2 alive of 2")

        dash.testid(f"fleet-pause-{them}").click()
        expect(dash.message("info", f"Asked daemon {them} to pause")).to_be_visible()
        poll_until(lambda: other.get("/v1/status").json()["paused"], timeout_s=TIMEOUT_S,
                   what="the other daemon to pause")
        expect(dash.testid(f"fleet-state-{them}")).to_have_text("paused")
        dash.testid(f"fleet-resume-{them}").click()
        poll_until(lambda: not other.get("/v1/status").json()["paused"], timeout_s=TIMEOUT_S,
                   what="the other daemon to resume")
        expect(dash.testid(f"fleet-state-{them}")).to_have_text("active")
        dash.testid(f"fleet-drain-{them}").click()
        poll_until(lambda: other.get("/v1/status").json()["draining"], timeout_s=TIMEOUT_S,
                   what="the other daemon to drain")
        expect(dash.testid(f"fleet-state-{them}")).to_have_text("draining")
        expect(dash.testid(f"fleet-state-{me}")).to_have_text("active")
