"""The dashboard's job controls and the job detail's attempts in a real headless Chromium
against a real ``gochatd`` process, on SQLite and on PostgreSQL. Each control is checked end
to end: the row changes status (or goes) in the database."""

from __future__ import annotations

from playwright.sync_api import expect

from tests.browser.support import TIMEOUT_S, Dash, job_status
from tests.support.daemon_process import poll_until


def gone_or(dash: Dash, job_id: int, status: str | None) -> None:
    poll_until(lambda: job_status(dash.db_url, job_id) == status or None, timeout_s=TIMEOUT_S,
               what=f"job {job_id} to be {status or 'deleted'} in the database")


def test_discard_bulk_retry_and_bulk_delete(dash: Dash) -> None:
    """Discard a retrying job; in the Dead tab select two jobs and retry them (they run
    again), then select the rest (select all) and delete them."""
    [waiting] = dash.enqueue("sys:fail", [{"message": "upstream timed out"}])
    dead = dash.enqueue("test:fail_once", [{"marker": f"bulk-{i}.marker"} for i in range(3)])
    dash.wait_job(waiting, "retrying")
    for job_id in dead:
        dash.wait_job(job_id, "dead")
    dash.refresh()

    dash.tab("retries")
    dash.testid(f"retries-discard-{waiting}").click()
    expect(dash.message("info", f"Job {waiting} discarded")).to_be_visible()
    gone_or(dash, waiting, "dead")
    assert dash.job(waiting)["error_class"] == "discarded"
    expect(dash.testid("retries-empty")).to_be_visible()

    dash.tab("dead")
    expect(dash.page.locator("#dead-body tr")).to_have_count(4)
    expect(dash.testid("dead-bulk-retry")).to_be_disabled()
    for job_id in dead[:2]:
        dash.testid(f"dead-select-{job_id}").check()
    expect(dash.testid("dead-selected")).to_have_text("2 selected")
    dash.testid("dead-bulk-retry").click()
    expect(dash.message("info", "Retry: 2 of 2 jobs changed")).to_be_visible()
    for job_id in dead[:2]:
        gone_or(dash, job_id, "completed")
    dash.refresh()
    expect(dash.page.locator("#dead-body tr")).to_have_count(2)
    expect(dash.testid("dead-selected")).to_have_text("none selected")

    dash.tab("dead")
    dash.testid("dead-select-all").check()
    expect(dash.testid("dead-selected")).to_have_text("2 selected")
    dash.testid("dead-bulk-delete").click()
    expect(dash.message("info", "Delete: 2 of 2 jobs changed")).to_be_visible()
    for job_id in (dead[2], waiting):
        gone_or(dash, job_id, None)
    expect(dash.testid("dead-empty")).to_be_visible()


def test_job_detail_lists_each_attempt(dash: Dash) -> None:
    """A job that died and was retried from the Dead tab: its detail lists both runs, newest
    first, with their outcome and error."""
    [job_id] = dash.enqueue("test:fail_once", [{"marker": "attempts.marker"}])
    dash.wait_job(job_id, "dead")
    dash.refresh()
    dash.tab("dead")
    dash.testid(f"dead-retry-{job_id}").click()
    dash.wait_job(job_id, "completed", min_fence=2)
    dash.tab("jobs")
    dash.open_job(dash.testid(f"job-row-{job_id}"), job_id)
    expect(dash.page.locator("#detail-attempts-body tr")).to_have_count(2)
    expect(dash.testid("attempt-row-2")).to_contain_text("completed")
    expect(dash.testid("attempt-row-1")).to_contain_text("dead")
    expect(dash.testid("attempt-row-1")).to_contain_text("non_retryable")
    expect(dash.testid("detail-delete")).to_be_visible()
    expect(dash.testid("detail-run-now")).to_be_hidden()
