"""The dashboard (admin/static/) in a real headless Chromium, driving a real ``gochatd``
process on SQLite and on PostgreSQL: queues and worker status, pausing a queue, drain/resume,
the Dead tab's retry, the Retries tab and cancelling from the job detail, retry all dead, the
Jobs tab's filters and "more" pagination, and the bearer token. The other tabs:
test_dashboard_tabs.py; the screenshots: test_dashboard_screenshots.py.
"""

from __future__ import annotations

import json
from pathlib import Path

from playwright.sync_api import expect

import gochatd
from gochatd.config.settings import DEFAULT_QUEUE_WEIGHTS
from tests.browser.support import TOKEN, Dash, Harness, paused_in_store
from tests.support.daemon_process import run_cli


def test_overview_pause_queue_and_drain(dash: Dash) -> None:
    """Default queues and worker status; pause/resume a queue; drain/resume the worker."""
    status = dash.get("/v1/status")
    for name, weight in DEFAULT_QUEUE_WEIGHTS.items():
        expect(dash.testid(f"queue-row-{name}")).to_be_visible()
        expect(dash.testid(f"queue-weight-{name}")).to_have_text(str(weight))
        expect(dash.testid(f"queue-state-{name}")).to_have_text("active")
        expect(dash.testid(f"pause-{name}")).to_have_text("Pause")
    expect(dash.testid("status-mode")).to_have_text("polling")
    expect(dash.testid("status-worker-id")).to_have_text(status["worker_id"])
    expect(dash.testid("status-version")).to_have_text(gochatd.__version__)
    expect(dash.testid("status-concurrency")).to_have_text(str(status["concurrency"]))
    expect(dash.testid("status-in-flight")).to_have_text("0")
    expect(dash.testid("status-draining")).to_have_text("no")
    expect(dash.testid("status-paused-queues")).to_have_text("none")
    expect(dash.testid("status-config-reloaded")).to_have_text("never")

    # Pause "low" from the page: the store has it, the worker follows, jobs wait there.
    dash.testid("pause-low").click()
    expect(dash.testid("queue-state-low")).to_have_text("paused")
    expect(dash.testid("pause-low")).to_have_text("Resume")
    expect(dash.message("info", "Queue low paused")).to_be_visible()
    assert dash.queue("low")["paused"] is True
    assert paused_in_store(dash.db_url) == ["low"]
    dash.wait_worker_paused(["low"])
    [held] = dash.enqueue("sys:noop", [{}], queue="low")
    dash.refresh()
    expect(dash.testid("status-paused-queues")).to_have_text("low")
    expect(dash.testid("queue-queued-low")).to_have_text("1")
    assert dash.job(held)["status"] == "queued"

    # Resume it: the held job runs.
    dash.testid("pause-low").click()
    expect(dash.testid("queue-state-low")).to_have_text("active")
    expect(dash.testid("pause-low")).to_have_text("Pause")
    assert dash.queue("low")["paused"] is False
    assert paused_in_store(dash.db_url) == []
    dash.wait_job(held, "completed")
    dash.wait_worker_paused([])
    dash.refresh()
    expect(dash.testid("queue-queued-low")).to_have_text("0")
    expect(dash.testid("status-paused-queues")).to_have_text("none")

    # Drain this worker, then resume it.
    expect(dash.testid("worker-resume")).to_be_disabled()
    dash.testid("worker-drain").click()
    expect(dash.testid("status-draining")).to_have_text("yes (drained)")
    expect(dash.testid("status-state")).to_have_text("drained")
    expect(dash.testid("worker-drain")).to_be_disabled()
    assert dash.get("/v1/status")["draining"] is True
    dash.testid("worker-resume").click()
    expect(dash.testid("status-draining")).to_have_text("no")
    expect(dash.testid("status-state")).to_have_text("active")
    assert dash.get("/v1/status")["draining"] is False


def test_dead_job_detail_and_retry(dash: Dash) -> None:
    """A job that dies shows in the Dead tab and in full in the detail drawer (escaped);
    Retry requeues it and it completes."""
    marker = dash.tmp / "fail-once.marker"
    payload = {"marker": str(marker), "note": "<img src=x onerror=\"window.__pwned = 1\">"}
    result = run_cli(
        ["enqueue", "test:fail_once", "--payload", json.dumps(payload), "--tenant", "acme"],
        dash.env, cwd=dash.tmp,
    )
    assert result.returncode == 0, result.stderr
    job_id = int(json.loads(result.stdout)["id"])
    dash.wait_job(job_id, "dead")
    dash.refresh()
    expect(dash.testid("queue-dead-default")).to_have_text("1")
    expect(dash.testid("tab-count-dead")).to_have_text("1")

    dash.tab("dead")
    row = dash.testid(f"dead-row-{job_id}")
    expect(row).to_be_visible()
    expect(row).to_contain_text("test:fail_once")
    expect(row).to_contain_text("non_retryable")
    expect(row).to_contain_text("acme")
    expect(dash.testid(f"dead-retry-{job_id}")).to_be_enabled()

    # The detail drawer: every field, the error and the payload, pretty-printed, as text.
    expect(dash.testid("job-detail")).to_be_hidden()
    dash.open_job(row, job_id)
    expect(dash.testid("detail-status")).to_have_text("dead")
    expect(dash.testid("detail-error-class")).to_have_text("non_retryable")
    # The class is error_class (non_retryable); last_error is the message alone (issue 23 #13).
    expect(dash.testid("detail-last-error")).to_have_text(
        "first attempt fails on purpose (marker fail-once.marker created)")
    expect(dash.testid("detail-cancel")).to_be_hidden()  # dead jobs cannot be cancelled
    expect(dash.testid("detail-discard")).to_be_hidden()
    expect(dash.testid("detail-run-now")).to_be_hidden()
    expect(dash.testid("detail-delete")).to_be_visible()
    job = dash.job(job_id)
    for key in job:
        expect(dash.testid(f"detail-field-{key}")).to_be_attached()
    expect(dash.testid("detail-field-job_type")).to_have_text("test:fail_once")
    expect(dash.testid("detail-field-tenant_id")).to_have_text("acme")
    shown = dash.testid("detail-payload").text_content() or ""
    assert json.loads(shown) == payload
    assert "\n  " in shown, "the payload is pretty-printed"
    assert dash.page.locator("img").count() == 0, "payload text was parsed as HTML"
    assert dash.page.evaluate("window.__pwned") is None
    dash.close_job()

    # Retry from the Dead tab: queued again, then completed on the second run.
    dash.testid(f"dead-retry-{job_id}").click()
    expect(dash.message("info", f"Job {job_id} is queued again")).to_be_visible()
    done = dash.wait_job(job_id, "completed")
    assert done["fence"] == 2 and marker.exists()
    dash.refresh()
    expect(dash.testid(f"dead-row-{job_id}")).to_have_count(0)
    expect(dash.testid("dead-empty")).to_be_visible()
    expect(dash.testid("tab-count-dead")).to_have_text("0")

    # Completed, its drawer shows what the handler returned (docs/results.md).
    dash.tab("jobs")
    dash.open_job(dash.testid(f"job-row-{job_id}"), job_id)
    expect(dash.testid("detail-status")).to_have_text("completed")
    expect(dash.testid("detail-result")).to_be_visible()
    shown_result = dash.testid("detail-result").text_content() or ""
    # A manual retry resets the attempts: its successful run is attempt 1 (fence 2).
    assert json.loads(shown_result) == {"marker": "fail-once.marker", "attempt": 1} == done["result"]
    expect(dash.testid("detail-field-result")).to_have_text("(shown above)")
    dash.close_job()


def test_cancel_retrying_and_retry_all_dead(dash: Dash) -> None:
    """The Retries tab lists a retrying job; cancel it from its detail; retry every dead job
    at once; retry the cancelled job from its detail."""
    [retrying] = dash.enqueue("sys:fail", [{"message": "transient"}])
    dead = dash.enqueue("test:fail_once", [{"marker": str(dash.tmp / f"m{i}")} for i in range(2)])
    dash.wait_job(retrying, "retrying")
    for job_id in dead:
        dash.wait_job(job_id, "dead")
    dash.refresh()
    expect(dash.testid("tab-count-retries")).to_have_text("1")
    expect(dash.testid("tab-count-dead")).to_have_text("2")

    dash.tab("retries")
    row = dash.testid(f"retries-row-{retrying}")
    expect(row).to_contain_text("sys:fail")
    expect(row).to_contain_text("SysFailError")
    expect(dash.testid("retries-summary")).to_contain_text("1 shown")
    dash.open_job(row, retrying)
    expect(dash.testid("detail-status")).to_have_text("retrying")
    expect(dash.testid("detail-retry")).to_be_hidden()
    for control in ("run-now", "discard", "cancel", "delete"):  # what a retrying job allows
        expect(dash.testid(f"detail-{control}")).to_be_visible()
    dash.testid("detail-cancel").click()
    expect(dash.message("info", f"Job {retrying} cancelled")).to_be_visible()
    dash.wait_job(retrying, "cancelled")
    expect(dash.testid("detail-status")).to_have_text("cancelled")
    expect(dash.testid(f"retries-row-{retrying}")).to_have_count(0)
    expect(dash.testid("retries-empty")).to_be_visible()
    dash.close_job()

    dash.tab("dead")
    for job_id in dead:
        expect(dash.testid(f"dead-row-{job_id}")).to_contain_text("non_retryable")
    dash.testid("retry-all-dead").click()
    expect(dash.message("info", "2 dead jobs queued again")).to_be_visible()
    for job_id in dead:
        dash.wait_job(job_id, "completed", min_fence=2)
    dash.refresh()
    expect(dash.testid("dead-empty")).to_be_visible()
    expect(dash.testid("retry-all-dead")).to_be_disabled()

    # The cancelled job, from the Jobs tab's detail: retried, it fails again and waits.
    dash.tab("jobs")
    dash.open_job(dash.testid(f"job-row-{retrying}"), retrying)
    expect(dash.testid("detail-status")).to_have_text("cancelled")
    expect(dash.testid("detail-cancel")).to_be_hidden()
    dash.testid("detail-retry").click()
    dash.wait_job(retrying, "retrying", min_fence=2)
    dash.refresh()
    expect(dash.testid("detail-status")).to_have_text("retrying")
    expect(dash.testid(f"job-status-{retrying}")).to_have_text("retrying")


def test_job_list_filters_and_more(dash: Dash) -> None:
    """Filter by tenant, status and queue; "More" fetches the next page by cursor."""
    dash.post("/v1/queues/low/pause")
    dash.wait_worker_paused(["low"])
    held = dash.enqueue("sys:noop", [{"n": i} for i in range(60)], queue="low", tenant_id="t-many")
    [other] = dash.enqueue("sys:noop", [{}], tenant_id="t-other")
    dash.wait_job(other, "completed")
    dash.tab("jobs")
    rows = dash.page.locator("#jobs-body tr")

    dash.testid("filter-tenant").fill("t-many")
    dash.testid("filter-tenant").press("Enter")
    expect(rows).to_have_count(50)  # newest first (the API's default)
    expect(dash.testid(f"job-row-{held[59]}")).to_be_visible()
    expect(dash.testid(f"job-row-{held[9]}")).to_have_count(0)
    expect(dash.testid("jobs-more")).to_be_visible()
    dash.testid("jobs-more").click()
    expect(rows).to_have_count(60)
    expect(dash.testid(f"job-row-{held[0]}")).to_be_visible()
    expect(dash.testid("jobs-more")).to_be_hidden()
    expect(dash.testid("jobs-count")).to_have_text("60 shown")
    # An auto-refresh keeps every page already shown.
    before = dash.testid("last-refresh").text_content()
    expect(dash.testid("last-refresh")).not_to_have_text(before or "")
    expect(rows).to_have_count(60)

    dash.testid("filter-status").select_option("completed")
    expect(dash.testid("jobs-empty")).to_be_visible()
    expect(rows).to_have_count(0)

    dash.testid("filter-reset").click()
    dash.testid("filter-tenant").fill("t-other")
    dash.testid("filter-apply").click()
    expect(rows).to_have_count(1)
    expect(dash.testid(f"job-status-{other}")).to_have_text("completed")

    dash.testid("filter-reset").click()
    dash.testid("filter-queue").select_option("low")
    expect(rows).to_have_count(50)
    dash.testid("filter-status").select_option("queued")
    expect(rows).to_have_count(50)
    expect(dash.testid("jobs-more")).to_be_visible()
    dash.post("/v1/queues/low/resume")


def test_bearer_token_from_the_page(harness: Harness, tmp_path: Path) -> None:
    """With GOCHAT_ADMIN_TOKEN set, the page shows the API's 401 and no data until the token
    is typed in; then (kept in localStorage) reads and changes go through."""
    dash = harness.open(f"sqlite:///{tmp_path / 'token.db'}", {"GOCHAT_ADMIN_TOKEN": TOKEN})
    error = dash.testid("message-error")
    expect(error).to_contain_text("401 unauthorized")
    expect(error).to_contain_text("enter the admin token")
    expect(dash.testid("queue-row-default")).to_have_count(0)
    assert dash.console_errors and all("401" in e for e in dash.console_errors), dash.console_errors

    dash.testid("token-input").fill(TOKEN)
    dash.testid("token-input").press("Enter")
    expect(dash.testid("queue-row-default")).to_be_visible()
    expect(error).to_have_count(0)  # the refresh that failed for want of it succeeded
    assert dash.queue("high")["paused"] is False
    dash.testid("pause-high").click()
    expect(dash.testid("queue-state-high")).to_have_text("paused")
    assert dash.queue("high")["paused"] is True
    assert dash.page.evaluate("localStorage.getItem('gochatd.adminToken')") == TOKEN

    dash.page.reload()
    expect(dash.testid("token-input")).to_have_value(TOKEN)
    expect(dash.testid("pause-high")).to_have_text("Resume")
    dash.testid("pause-high").click()
    expect(dash.testid("queue-state-high")).to_have_text("active")
    assert dash.queue("high")["paused"] is False
    expect(dash.testid("message-error")).to_have_count(0)
