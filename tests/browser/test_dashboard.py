"""The dashboard (admin/static/index.html) in a real headless Chromium, driving a real
``gochatd`` process on SQLite and on PostgreSQL: queues and worker status, pausing a queue,
drain/resume, retrying a dead job from the dead-jobs panel, cancelling a retrying job, retry
all dead, the job list's filters and "more" pagination, the bearer token, and a screenshot.

Chromium is Debian's (/usr/bin/chromium; ``.ci/test`` installs it). A missing browser fails
the run; Playwright never downloads one. Every wait is a condition with a deadline.
"""

from __future__ import annotations

import json
import shutil
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import httpx
import pytest
import trio
from playwright.sync_api import Browser, BrowserContext, Locator, Page, expect, sync_playwright

import gochatd
from gochatd.client import Client
from gochatd.config import DEFAULT_QUEUE_WEIGHTS
from tests.support.daemon_process import REPO_ROOT, DaemonProcess, poll_until, run_cli
from tests.support.e2e_jobs import query

CHROMIUM = Path("/usr/bin/chromium")
CHROMIUM_ARGS = [
    "--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
    "--disable-background-networking", "--disable-component-update", "--disable-sync",
]
HANDLERS = "tests.support.flaky_handlers"
ARTIFACTS = REPO_ROOT / "artifacts"
TIMEOUT_MS = 10_000
TIMEOUT_S = TIMEOUT_MS / 1000
TOKEN = "s3cret-token"

#: A failed job waits ``uniform(0, min(cap, base))`` before its next attempt: with a day,
#: a retryable failure stays ``retrying`` for the whole test.
SLOW_RETRIES = {"GOCHAT_WORKER_RETRY_BASE_S": "86400", "GOCHAT_WORKER_RETRY_CAP_S": "86400"}

expect.set_options(timeout=TIMEOUT_MS)


# -- fixtures ----------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def browser() -> Iterator[Browser]:
    if not CHROMIUM.exists():
        pytest.fail(
            f"{CHROMIUM} is missing: the browser tests need Debian's chromium "
            "(apt-get install -y chromium; .ci/test installs it)"
        )
    pw = sync_playwright().start()
    try:
        browser = pw.chromium.launch(
            executable_path=str(CHROMIUM), args=CHROMIUM_ARGS, headless=True, timeout=30_000
        )
        try:
            yield browser
        finally:
            browser.close()
    finally:
        pw.stop()


@pytest.fixture(params=["sqlite", "postgres"])
def db_url(request: pytest.FixtureRequest, tmp_path: Path) -> str:
    if request.param == "sqlite":
        return f"sqlite:///{tmp_path / 'gochatd.db'}"
    url = str(request.getfixturevalue("pg_clean"))
    query(url, "DELETE FROM gochatd_queue_pauses")  # the run's database is shared by tests
    return url


@dataclass
class Dash:
    """One daemon and one browser page on its dashboard."""

    daemon: DaemonProcess
    base: str
    db_url: str
    env: dict[str, str]
    page: Page
    http: httpx.Client
    tmp: Path
    page_errors: list[str] = field(default_factory=list)
    console_errors: list[str] = field(default_factory=list)

    @property
    def backend(self) -> str:
        return "sqlite" if self.db_url.startswith("sqlite:") else "postgres"

    def testid(self, testid: str) -> Locator:
        return self.page.get_by_test_id(testid)

    def refresh(self) -> None:
        """Click "Refresh": the page shows what the API says now, without waiting for the
        next 2-second tick (callers first wait for the API to show the change)."""
        self.testid("refresh-now").click()

    def message(self, kind: str, text: str) -> Locator:
        """The message-area entry of ``kind`` (info, error) that contains ``text``."""
        return self.testid(f"message-{kind}").filter(has_text=text)

    # -- the API, read over HTTP (what the page sees too) ----------------------------------

    def get(self, path: str) -> Any:
        response = self.http.get(path)
        assert response.status_code == 200, f"GET {path}: {response.status_code} {response.text}"
        return response.json()

    def post(self, path: str) -> Any:
        response = self.http.post(path, headers={"Authorization": f"Bearer {TOKEN}"})
        assert response.status_code == 200, f"POST {path}: {response.status_code} {response.text}"
        return response.json()

    def job(self, job_id: int) -> dict[str, Any]:
        job: dict[str, Any] = self.get(f"/v1/jobs/{job_id}")
        return job

    def queue(self, name: str) -> dict[str, Any]:
        [found] = [q for q in self.get("/v1/queues")["queues"] if q["queue"] == name]
        return dict(found)

    def wait_job(self, job_id: int, *statuses: str, min_fence: int = 0) -> dict[str, Any]:
        def probe() -> dict[str, Any] | None:
            job = self.job(job_id)
            return job if job["status"] in statuses and job["fence"] >= min_fence else None

        return poll_until(probe, timeout_s=TIMEOUT_S, what=f"job {job_id} to be {'/'.join(statuses)}")

    def wait_worker_paused(self, queues: Sequence[str]) -> None:
        """Until this worker has read the fleet-wide pauses from the store."""
        poll_until(
            lambda: self.get("/v1/status")["paused_queues"] == sorted(queues),
            timeout_s=TIMEOUT_S, what=f"the worker to see paused queues {sorted(queues)}",
        )

    def enqueue(self, job_type: str, payloads: Sequence[dict[str, Any]], **options: Any) -> list[int]:
        """Enqueue with ``gochatd.Client`` in this process; the new ids in order."""

        async def run() -> list[int]:
            async with Client(self.db_url, None) as client:
                return [(await client.enqueue(job_type, dict(p), **options)).id for p in payloads]

        return trio.run(run)


class Harness:
    """Starts daemons and browser pages; at teardown checks the page raised no JavaScript
    error and each daemon stops cleanly (exit 0, no traceback)."""

    def __init__(self, browser: Browser, tmp_path: Path) -> None:
        self.browser = browser
        self.tmp_path = tmp_path
        self.dashes: list[Dash] = []
        self.contexts: list[BrowserContext] = []

    def open(self, db_url: str, env: dict[str, str] | None = None) -> Dash:
        full_env = {"GOCHAT_DATABASE_URL": db_url, **SLOW_RETRIES, **(env or {})}
        name = f"daemon{len(self.dashes) + 1}"
        daemon = DaemonProcess(
            self.tmp_path, name, ["--handlers", HANDLERS, "--migrate"], full_env, cwd=self.tmp_path
        )
        daemon.start()
        base = str(daemon.wait_for_event("admin_listening", timeout_s=30)["address"])
        daemon.wait_ready("polling")
        context = self.browser.new_context(viewport={"width": 1400, "height": 1000})
        context.set_default_timeout(TIMEOUT_MS)
        self.contexts.append(context)
        page = context.new_page()
        token = full_env.get("GOCHAT_ADMIN_TOKEN")
        headers = {"Authorization": f"Bearer {token}"} if token else {}
        dash = Dash(daemon, base, db_url, full_env, page,
                    httpx.Client(base_url=base, timeout=10, headers=headers), self.tmp_path)
        page.on("pageerror", lambda exc: dash.page_errors.append(str(exc)))
        page.on("console", lambda msg: dash.console_errors.append(msg.text) if msg.type == "error" else None)
        self.dashes.append(dash)
        page.goto(base + "/")
        if token:  # the page shows nothing until the token is typed in
            expect(dash.testid("message-error")).to_be_visible()
        else:
            expect(dash.testid("queue-row-default")).to_be_visible()
        return dash

    def close(self) -> None:
        for context in self.contexts:
            context.close()
        for dash in self.dashes:
            dash.http.close()
            try:
                if dash.daemon.alive():
                    assert dash.daemon.stop() == 0, dash.daemon.output()[-4000:]
                dash.daemon.assert_clean_output()
            finally:
                dash.daemon.cleanup()


@pytest.fixture
def harness(browser: Browser, tmp_path: Path) -> Iterator[Harness]:
    h = Harness(browser, tmp_path)
    try:
        yield h
    finally:
        h.close()
    for dash in h.dashes:
        assert dash.page_errors == [], f"JavaScript errors on the page: {dash.page_errors}"


@pytest.fixture
def dash(harness: Harness, db_url: str) -> Iterator[Dash]:
    d = harness.open(db_url)
    yield d
    # Every HTTP error the page met was asserted by the test that caused it; none here.
    assert d.console_errors == [], f"console errors: {d.console_errors}"


def paused_in_store(db_url: str) -> list[str]:
    return sorted(str(r[0]) for r in query(db_url, "SELECT queue FROM gochatd_queue_pauses"))


# -- tests -------------------------------------------------------------------------------------


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
    """A job that dies shows in the dead panel and in full in the detail view (escaped);
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

    row = dash.testid(f"dead-row-{job_id}")
    expect(row).to_be_visible()
    expect(row).to_contain_text("test:fail_once")
    expect(row).to_contain_text("non_retryable")
    expect(row).to_contain_text("acme")
    expect(dash.testid(f"cancel-{job_id}")).to_be_disabled()  # dead jobs cannot be cancelled
    expect(dash.testid("queue-dead-default")).to_have_text("1")
    expect(dash.testid(f"job-status-{job_id}")).to_have_text("dead")

    # The detail view: every field, the error and the payload, pretty-printed, as text.
    expect(dash.testid("detail-empty")).to_be_visible()
    expect(dash.testid("detail-retry")).to_be_hidden()
    expect(dash.testid("detail-status")).to_be_hidden()
    dash.testid(f"job-row-{job_id}").click()
    expect(dash.testid("detail-title")).to_have_text(f"Job {job_id}")
    expect(dash.testid("detail-status")).to_have_text("dead")
    expect(dash.testid("detail-error-class")).to_have_text("non_retryable")
    expect(dash.testid("detail-last-error")).to_contain_text("NonRetryable")
    job = dash.job(job_id)
    for key in job:
        expect(dash.testid(f"detail-field-{key}")).to_be_attached()
    expect(dash.testid("detail-field-job_type")).to_have_text("test:fail_once")
    expect(dash.testid("detail-field-tenant_id")).to_have_text("acme")
    expect(dash.testid("detail-field-attempts")).to_have_text("1")
    shown = dash.testid("detail-payload").text_content() or ""
    assert json.loads(shown) == payload
    assert "\n  " in shown, "the payload is pretty-printed"
    assert dash.page.locator("img").count() == 0, "payload text was parsed as HTML"
    assert dash.page.evaluate("window.__pwned") is None

    # Retry from the dead panel: queued again, then completed on the second run.
    dash.testid(f"retry-{job_id}").click()
    expect(dash.message("info", f"Job {job_id} is queued again")).to_be_visible()
    done = dash.wait_job(job_id, "completed")
    assert done["fence"] == 2 and marker.exists()
    dash.refresh()
    expect(dash.testid(f"dead-row-{job_id}")).to_have_count(0)
    expect(dash.testid("dead-empty")).to_be_visible()
    expect(dash.testid(f"job-status-{job_id}")).to_have_text("completed")
    expect(dash.testid("detail-status")).to_have_text("completed")
    expect(dash.testid("queue-dead-default")).to_have_text("0")

    dash.testid("detail-close").click()
    expect(dash.testid("detail-empty")).to_be_visible()
    expect(dash.testid("detail-payload")).to_be_hidden()
    expect(dash.testid("detail-retry")).to_be_hidden()


def test_cancel_retrying_and_retry_all_dead(dash: Dash) -> None:
    """Cancel a retrying job from the panel, retry every dead job at once, and retry the
    cancelled job from its detail view."""
    [retrying] = dash.enqueue("sys:fail", [{"message": "transient"}])
    dead = dash.enqueue("test:fail_once", [{"marker": str(dash.tmp / f"m{i}")} for i in range(2)])
    dash.wait_job(retrying, "retrying")
    for job_id in dead:
        dash.wait_job(job_id, "dead")
    dash.refresh()

    expect(dash.testid(f"dead-row-{retrying}")).to_contain_text("retrying")
    expect(dash.testid(f"retry-{retrying}")).to_be_disabled()
    for job_id in dead:
        expect(dash.testid(f"dead-row-{job_id}")).to_contain_text("dead")
    expect(dash.testid("dead-summary")).to_have_text("2 dead · 1 retrying")

    dash.testid(f"cancel-{retrying}").click()
    expect(dash.message("info", f"Job {retrying} cancelled")).to_be_visible()
    dash.wait_job(retrying, "cancelled")
    expect(dash.testid(f"dead-row-{retrying}")).to_have_count(0)

    dash.testid("retry-all-dead").click()
    expect(dash.message("info", "2 dead jobs queued again")).to_be_visible()
    for job_id in dead:
        dash.wait_job(job_id, "completed", min_fence=2)
    dash.refresh()
    expect(dash.testid("dead-empty")).to_be_visible()
    expect(dash.testid("retry-all-dead")).to_be_disabled()

    # The cancelled job, from the detail view: retried, it fails again and waits to retry.
    dash.testid(f"job-row-{retrying}").click()
    expect(dash.testid("detail-status")).to_have_text("cancelled")
    expect(dash.testid("detail-cancel")).to_be_disabled()
    dash.testid("detail-retry").click()
    dash.wait_job(retrying, "retrying", min_fence=2)
    dash.refresh()
    expect(dash.testid("detail-status")).to_have_text("retrying")
    expect(dash.testid(f"dead-row-{retrying}")).to_be_visible()


def test_job_list_filters_and_more(dash: Dash) -> None:
    """Filter by tenant, status and queue; "More" fetches the next page by cursor."""
    dash.post("/v1/queues/low/pause")
    dash.wait_worker_paused(["low"])
    held = dash.enqueue("sys:noop", [{"n": i} for i in range(60)], queue="low", tenant_id="t-many")
    [other] = dash.enqueue("sys:noop", [{}], tenant_id="t-other")
    dash.wait_job(other, "completed")
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


def test_screenshot(dash: Dash) -> None:
    """A busy dashboard, saved as artifacts/dashboard.png (PostgreSQL: dashboard-postgres.png)
    and in tmp_path."""
    dash.post("/v1/queues/search/pause")
    dash.wait_worker_paused(["search"])
    dash.enqueue("sys:noop", [{"n": i} for i in range(3)], queue="high", tenant_id="acme")
    dash.enqueue("sys:noop", [{"query": "invoices 2024"}], queue="search", tenant_id="acme")
    dash.enqueue("sys:sleep", [{"seconds": 1}], delay_s=3600, tenant_id="globex")
    [dead] = dash.enqueue(
        "test:fail_once", [{"marker": str(dash.tmp / "shot.marker"), "customer": {"id": 42}}],
        tenant_id="globex",
    )
    [retrying] = dash.enqueue("sys:fail", [{"message": "upstream timed out"}], queue="events")
    dash.wait_job(dead, "dead")
    dash.wait_job(retrying, "retrying")
    dash.refresh()

    expect(dash.testid("queue-queued-search")).to_have_text("1")
    expect(dash.testid("queue-delayed-default")).to_have_text("1")
    expect(dash.testid("queue-retrying-events")).to_have_text("1")
    expect(dash.testid(f"dead-row-{retrying}")).to_be_visible()
    expect(dash.testid(f"job-status-{dead}")).to_have_text("dead")
    dash.testid(f"job-row-{dead}").click()
    expect(dash.testid("detail-status")).to_have_text("dead")
    expect(dash.testid("status-paused-queues")).to_have_text("search")
    expect(dash.testid("last-refresh")).to_contain_text("updated")

    name = "dashboard.png" if dash.backend == "sqlite" else f"dashboard-{dash.backend}.png"
    shot = dash.tmp / name
    dash.page.evaluate("window.scrollTo(0, 0)")  # the sticky header belongs at the top
    dash.page.mouse.move(0, 0)  # no hover highlight in the picture
    dash.page.screenshot(path=str(shot), full_page=True)
    assert shot.stat().st_size > 20_000
    ARTIFACTS.mkdir(exist_ok=True)
    shutil.copyfile(shot, ARTIFACTS / name)
    dash.post("/v1/queues/search/resume")
