"""The dashboard's reply outbox panel in a real headless Chromium: a reply the provider
refuses (400) shows as dead with its error class; Retry delivers it, and it leaves the panel."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path

import pytest
from playwright.sync_api import expect

from tests.browser.support import Harness
from tests.support.daemon_process import poll_until
from tests.support.e2e_jobs import query
from tests.support.webhook_receiver import Answer, WebhookReceiver


@pytest.fixture
def receiver() -> Iterator[WebhookReceiver]:
    server = WebhookReceiver().start()
    yield server
    server.stop()


def test_dead_reply_shows_and_retry_delivers_it(
    harness: Harness, tmp_path: Path, receiver: WebhookReceiver
) -> None:
    receiver.script = [Answer(400)]
    db_url = f"sqlite:///{tmp_path / 'outbox.db'}"
    channels = {"wa": {"url": receiver.url, "retry_base_s": 0.05, "retry_cap_s": 0.1}}
    dash = harness.open(db_url, {"GOCHAT_OUTBOX_CHANNELS": json.dumps(channels),
                                 "GOCHAT_OUTBOX_POLL_S": "0.1"})
    # A reply row as a completion writes it (the daemon has no replying handler loaded).
    query(db_url, "INSERT INTO reply_outbox (tenant_id, job_id, channel, recipient, body, "
                  "dedupe_key) VALUES ('acme', 7, 'wa', '+1555', '{\"text\": \"hi\"}', 'k-1')")
    [(outbox_id,)] = query(db_url, "SELECT id FROM reply_outbox")
    poll_until(lambda: dash.get(f"/v1/outbox/{outbox_id}")["status"] == "dead",
               timeout_s=10, what="the refused reply to be dead")
    dash.tab("outbox")
    row = dash.testid(f"outbox-row-{outbox_id}")
    expect(row).to_be_visible()
    expect(dash.testid(f"outbox-status-{outbox_id}")).to_have_text("dead")
    expect(row).to_contain_text("http_400")
    expect(row).to_contain_text("acme")
    expect(dash.testid("outbox-summary")).to_contain_text("1 dead")

    dash.testid(f"outbox-retry-{outbox_id}").click()
    expect(dash.message("info", f"Reply {outbox_id} is")).to_be_visible()
    poll_until(lambda: dash.get(f"/v1/outbox/{outbox_id}")["status"] == "sent",
               timeout_s=10, what="the retried reply to be sent")
    dash.refresh()
    expect(dash.testid(f"outbox-row-{outbox_id}")).to_have_count(0)
    expect(dash.testid("outbox-empty")).to_be_visible()
    assert [r.status for r in receiver.snapshot()] == [400, 200]
    assert dash.console_errors == [], dash.console_errors
