"""The dashboard's looks, measured in a real headless Chromium on a real ``gochatd``: the token
field says whether this daemon needs a token, a disabled button looks disabled, the job
drawer leaves the tab bar usable, and the count cards stay on one row at 1024 px."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from playwright.sync_api import expect

from tests.browser.support import TOKEN, Dash, Harness

#: What makes a button look clickable or not.
LOOK = "['color', 'backgroundColor', 'borderColor', 'cursor']"


def _look(dash: Dash, testid: str) -> dict[str, Any]:
    look: dict[str, Any] = dash.testid(testid).evaluate(
        f"(b) => Object.fromEntries({LOOK}.map((k) => [k, getComputedStyle(b)[k]]))")
    return look


def _box(dash: Dash, testid: str) -> dict[str, float]:
    box = dash.testid(testid).bounding_box()
    assert box is not None, f"{testid} is not displayed"
    return box


def test_the_token_field_says_whether_the_daemon_needs_one(harness: Harness, tmp_path: Path) -> None:
    needed = harness.open(f"sqlite:///{tmp_path / 'token.db'}", {"GOCHAT_ADMIN_TOKEN": TOKEN})
    expect(needed.testid("token-need")).to_have_text("(required)")
    expect(needed.testid("token-input")).to_have_attribute("placeholder", "admin token (required)")
    # The page learnt it without the token: GET /v1/auth is the one open answer, and it says
    # only that; everything else stays 401 (tests/admin/test_auth.py walks every route).
    assert needed.http.get("/v1/auth", headers={"Authorization": ""}).json() == {"token_required": True}
    assert needed.http.get("/v1/status", headers={"Authorization": ""}).status_code == 401
    needed.console_errors.clear()  # the 401s of the refresh before the token is typed in

    free = harness.open(f"sqlite:///{tmp_path / 'free.db'}")
    expect(free.testid("token-need")).to_have_text("(not needed)")
    expect(free.testid("token-input")).to_have_attribute("placeholder", "no admin.token set")
    assert "optional" not in free.testid("token-label").inner_text()
    assert free.console_errors == []


def test_disabled_buttons_look_disabled(harness: Harness, tmp_path: Path) -> None:
    dash = harness.open(f"sqlite:///{tmp_path / 'buttons.db'}")
    drain, resume = "worker-drain", "worker-resume"
    expect(dash.testid(drain)).to_be_enabled()
    expect(dash.testid(resume)).to_be_disabled()
    drain_on, resume_off = _look(dash, drain), _look(dash, resume)

    dash.testid(drain).click()  # this worker drains: Drain disabled, Resume enabled
    expect(dash.testid("status-state")).to_have_text("drained")
    expect(dash.testid(drain)).to_be_disabled()
    expect(dash.testid(resume)).to_be_enabled()
    drain_off, resume_on = _look(dash, drain), _look(dash, resume)

    for on, off in ((drain_on, drain_off), (resume_on, resume_off)):
        assert off["cursor"] == "not-allowed" and on["cursor"] == "pointer", (on, off)
        assert off["color"] != on["color"], (on, off)
        assert off["backgroundColor"] != on["backgroundColor"] or off["borderColor"] != on["borderColor"]
    # Whatever the kind (a warning button, a plain one), disabled looks the same.
    assert drain_off == resume_off
    dash.testid(resume).click()
    expect(dash.testid("status-state")).to_have_text("active")


def test_the_job_drawer_leaves_the_tab_bar_usable(harness: Harness, tmp_path: Path) -> None:
    dash = harness.open(f"sqlite:///{tmp_path / 'drawer.db'}", viewport=(1280, 700))
    ids = dash.enqueue("sys:noop", [{"n": i} for i in range(60)], queue="parked")
    dash.tab("jobs")
    dash.open_job(dash.testid(f"job-row-{ids[-1]}"), ids[-1])
    for scrolled in (False, True):
        if scrolled:
            dash.page.evaluate("window.scrollTo(0, 2000)")
            assert dash.page.evaluate("window.scrollY") > 300, "the page is too short to scroll"
        tabs, drawer = _box(dash, "tab-overview"), _box(dash, "job-detail")
        nav = dash.page.locator("#tabs").bounding_box()
        assert nav is not None and tabs["y"] >= 0, (scrolled, tabs)
        assert drawer["y"] >= nav["y"] + nav["height"] - 0.5, (scrolled, nav, drawer)
    # The right-most tab, once under the drawer, takes a click with the job still open.
    outbox = _box(dash, "tab-outbox")
    beside = outbox["x"] + outbox["width"] > _box(dash, "job-detail")["x"]
    assert beside, "the test needs a tab where the drawer is"
    dash.testid("tab-outbox").click()
    expect(dash.testid("panel-outbox")).to_be_visible()
    expect(dash.testid("job-detail")).to_be_visible()


def test_the_count_cards_stay_on_one_row_at_1024_px(harness: Harness, tmp_path: Path) -> None:
    dash = harness.open(f"sqlite:///{tmp_path / 'narrow.db'}", viewport=(1024, 768))
    cards = dash.page.locator("#counts > a:not([hidden])")
    expect(cards).to_have_count(8)
    expect(dash.testid("count-total")).to_have_text("0")
    boxes = [cards.nth(i).bounding_box() for i in range(8)]
    assert all(b is not None for b in boxes)
    tops = {round(b["y"]) for b in boxes if b}
    assert len(tops) == 1, f"the cards wrap: tops {sorted(tops)}"
    rights = [b["x"] + b["width"] for b in boxes if b]
    lefts = [b["x"] for b in boxes if b]
    assert all(lefts[i + 1] >= rights[i] for i in range(7)), (lefts, rights)
    assert rights[-1] <= 1024, rights
    # No label is cut: each card is wide enough for its text.
    clipped = dash.page.evaluate(
        "Array.from(document.querySelectorAll('#counts .label'))"
        ".filter((l) => l.scrollWidth > l.clientWidth).map((l) => l.textContent)")
    assert clipped == [], clipped
    # The header stays one line too (the token field's placeholder says whether it is needed).
    header = dash.page.locator("header").bounding_box()
    refresh = _box(dash, "refresh-now")
    assert header is not None and header["height"] < refresh["height"] + 35, header
    expect(dash.testid("token-input")).to_have_attribute("placeholder", "no admin.token set")
