"""``gochatd outbox list|show|retry`` against a real SQLite file: JSON output, the table,
an operator's retry of a dead reply, and a refused retry of one that is not dead."""

from __future__ import annotations

import json
from pathlib import Path

from tests.support.daemon_process import run_cli
from tests.support.e2e_jobs import query


def test_outbox_list_show_and_retry(tmp_path: Path) -> None:
    url = f"sqlite:///{tmp_path / 'outbox.db'}"
    env = {"GOCHAT_DATABASE_URL": url}
    assert run_cli(["db", "upgrade"], env).returncode == 0
    query(url, "INSERT INTO reply_outbox (tenant_id, job_id, channel, recipient, body, dedupe_key,"
               " status, attempts, error_class) VALUES ('acme', 3, 'wa', '+1', '{\"t\": 1}', 'k-1',"
               " 'dead', 4, 'http_410'), ('acme', 4, 'sms', '+2', '{}', 'k-2', 'pending', 0, NULL)")

    listed = run_cli(["outbox", "list", "--json", "--status", "dead"], env)
    assert listed.returncode == 0, listed.stderr
    [dead] = json.loads(listed.stdout)
    assert (dead["dedupe_key"], dead["error_class"], dead["body"]) == ("k-1", "http_410", {"t": 1})

    table = run_cli(["outbox", "list", "--channel", "sms"], env)
    assert table.returncode == 0 and "k-2" in table.stdout and "k-1" not in table.stdout

    shown = run_cli(["outbox", "show", str(dead["id"]), "--json"], env)
    assert json.loads(shown.stdout)["status"] == "dead"

    retried = run_cli(["outbox", "retry", str(dead["id"])], env)
    assert retried.returncode == 0, retried.stderr
    again = json.loads(retried.stdout)
    assert (again["status"], again["attempts"]) == ("pending", 0)

    refused = run_cli(["outbox", "retry", str(dead["id"])], env)
    assert refused.returncode == 2
    assert refused.stderr.strip() == (
        f"gochatd: cannot retry outbox message {dead['id']}: it is pending, not dead")
