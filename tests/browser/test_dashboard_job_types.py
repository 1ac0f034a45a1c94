"""The dashboard marks a queue holding due jobs that no live daemon can run (issue 23, item
2; docs/job-types.md, "A type no daemon can run"), from GET /v1/job-types' without_handler;
the other queues carry no mark."""

from __future__ import annotations

from playwright.sync_api import expect

from tests.browser.support import Dash
from tests.support.daemon_process import poll_until


def test_a_queue_with_jobs_no_daemon_can_run_is_marked(dash: Dash) -> None:
    expect(dash.testid("queue-row-default")).to_be_visible()
    expect(dash.testid("queue-nohandler-default")).to_be_hidden()
    [stuck] = dash.enqueue("dash:nobody-runs-this", [{}])
    poll_until(lambda: dash.get("/v1/job-types")["without_handler"], timeout_s=20,
               what="the job listed without a handler")
    dash.refresh()
    mark = dash.testid("queue-nohandler-default")
    expect(mark).to_have_text("no handler: 1")
    expect(mark).to_have_attribute("title", "Waiting, and no live daemon can run them: "
                                            "dash:nobody-runs-this (1)")
    expect(dash.testid("queue-nohandler-low")).to_be_hidden()
    assert dash.job(stuck)["status"] == "queued"
