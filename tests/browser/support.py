"""The browser tests' harness: real ``gochatd`` daemons (``--handlers
tests.support.flaky_handlers``) and headless Chromium pages on their dashboards.

Chromium is Debian's (/usr/bin/chromium; ``.ci/test`` installs it). A missing browser fails
the run; Playwright never downloads one. Every wait is a condition with a deadline.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import httpx
import trio
from playwright.sync_api import Browser, BrowserContext, Locator, Page, expect

from gochatd.client.client import Client
from tests.support.daemon_process import REPO_ROOT, DaemonProcess, poll_until
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

    def post(self, path: str, body: dict[str, Any] | None = None, status: int = 200) -> Any:
        response = self.http.post(path, json=body)
        assert response.status_code == status, f"POST {path}: {response.status_code} {response.text}"
        return response.json()

    def serves(self, path: str, method: str = "get") -> bool:
        """Whether this daemon's admin API documents (and so serves) ``method path``."""
        return method in self.get("/v1/openapi.json")["paths"].get(path, {})

    def tab(self, name: str) -> Locator:
        """Open a tab of the dashboard; its panel."""
        self.testid(f"tab-{name}").click()
        panel = self.testid(f"panel-{name}")
        expect(panel).to_be_visible()
        return panel

    def open_job(self, row: Locator, job_id: int) -> None:
        """Click a job's row: the detail drawer shows it."""
        row.click()
        expect(self.testid("job-detail")).to_be_visible()
        expect(self.testid("detail-title")).to_have_text(f"Job {job_id}")

    def close_job(self) -> None:
        self.testid("detail-close").click()
        expect(self.testid("job-detail")).to_be_hidden()

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
        self.daemons: list[DaemonProcess] = []
        self.contexts: list[BrowserContext] = []

    def start_daemon(self, db_url: str, env: dict[str, str] | None = None) -> tuple[DaemonProcess, str]:
        """A ``gochatd`` process on ``db_url``, ready; it and its admin API's base URL."""
        full_env = {"GOCHAT_DATABASE_URL": db_url, **SLOW_RETRIES, **(env or {})}
        name = f"daemon{len(self.daemons) + 1}"
        daemon = DaemonProcess(
            self.tmp_path, name, ["--handlers", HANDLERS, "--migrate"], full_env, cwd=self.tmp_path
        )
        self.daemons.append(daemon)
        daemon.start()
        base = str(daemon.wait_for_event("admin_listening", timeout_s=30)["address"])
        daemon.wait_ready("polling")
        return daemon, base

    def open(self, db_url: str, env: dict[str, str] | None = None, *,
             viewport: tuple[int, int] = (1400, 1000)) -> Dash:
        full_env = {"GOCHAT_DATABASE_URL": db_url, **SLOW_RETRIES, **(env or {})}
        daemon, base = self.start_daemon(db_url, env)
        context = self.browser.new_context(viewport={"width": viewport[0], "height": viewport[1]})
        context.set_default_timeout(TIMEOUT_MS)
        self.contexts.append(context)
        page = context.new_page()
        token = full_env.get("GOCHAT_ADMIN_TOKEN")
        headers = {"Authorization": f"Bearer {token}"} if token else {}
        dash = Dash(daemon, base, db_url, full_env, page,
                    httpx.Client(base_url=base, timeout=10, headers=headers), self.tmp_path)
        page.on("pageerror", lambda exc: dash.page_errors.append(str(exc)))
        page.on("console", lambda msg: dash.console_errors.append(msg.text) if msg.type == "error" else None)
        page.on("dialog", lambda dialog: dialog.accept())  # "Delete job …?" confirmations
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
        for daemon in self.daemons:
            try:
                if daemon.alive():
                    assert daemon.stop() == 0, daemon.output()[-4000:]
                daemon.assert_clean_output()
            finally:
                daemon.cleanup()


def paused_in_store(db_url: str) -> list[str]:
    return sorted(str(r[0]) for r in query(db_url, "SELECT queue FROM gochatd_queue_pauses"))


def job_status(db_url: str, job_id: int) -> str | None:
    """The job's status as the database has it (None: no such row)."""
    rows = query(db_url, "SELECT status FROM background_jobs WHERE id = %s", (job_id,))
    return str(rows[0][0]) if rows else None


def add_past_counts(db_url: str, minutes_ago: int, queue: str, job_type: str, completed: int,
                    failed: int = 0, retried: int = 0) -> None:
    """A row of ``gochatd_job_counts`` for the minute ``minutes_ago`` before the database's
    current one, as the daemons' flushes leave it (loops/stats.py only ever writes the
    current minute): the charts read it like any other."""
    if db_url.startswith("sqlite:"):
        minute = (f"(CAST(((julianday('now') - 2440587.5) * 86400.0) / 60 AS INTEGER) "
                  f"- {int(minutes_ago)}) * 60.0")
    else:
        minute = f"date_trunc('minute', now()) - make_interval(mins => {int(minutes_ago)})"
    query(db_url, "INSERT INTO gochatd_job_counts (minute, queue, job_type, completed, failed, "
                  f"retried) VALUES ({minute}, %s, %s, %s, %s, %s)",
          (queue, job_type, completed, failed, retried))
