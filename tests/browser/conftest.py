"""Fixtures of the dashboard's browser tests (tests/browser/support.py has the harness)."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
from playwright.sync_api import Browser, sync_playwright

from tests.browser.support import CHROMIUM, CHROMIUM_ARGS, Dash, Harness
from tests.support.e2e_jobs import query


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

