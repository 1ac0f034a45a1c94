"""As a new user would try it from the README: two real daemons on PostgreSQL, a periodic job
(``every: 1s``) whose type is run by an HTTP handler served by a tiny local web server.
Each slot is enqueued once across both daemons and posted once, signed; the server's
failures are retried; the daemons stop cleanly."""

from __future__ import annotations

import signal
from collections import Counter
from collections.abc import Iterator
from pathlib import Path

import psycopg
import pytest

from tests.support.daemon_process import DaemonFactory, poll_until
from tests.support.http_endpoint import Answer, ScriptedEndpoint, scripted_endpoint

SECRET = "e2e-hook-secret"


@pytest.fixture
def endpoint() -> Iterator[ScriptedEndpoint]:
    with scripted_endpoint() as ep:
        yield ep


def test_two_daemons_fire_a_periodic_http_job_once_per_slot(
    tmp_path: Path, daemons: DaemonFactory, pg_clean: str, endpoint: ScriptedEndpoint
) -> None:
    from gochatd.signing import SIGNATURE_HEADER, verify

    endpoint.script(Answer(503, b"busy"))  # the first delivery fails and is retried
    config = tmp_path / "gochatd.yaml"
    config.write_text(
        f"database_url: {pg_clean}\n"
        "admin: {listen: 'off'}\n"
        "worker: {retry_base_s: 0.05, retry_cap_s: 0.2}\n"
        "handlers:\n"
        "  http:\n"
        f'    "hook:*": {{url: "{endpoint.url}/jobs", timeout_s: 5, secret_env: E2E_HOOK_SECRET}}\n'
        "periodic:\n"
        '  "hook:tick": {every: 1s, queue: scheduled_jobs}\n'
    )
    env = {"GOCHAT_CONFIG": str(config), "E2E_HOOK_SECRET": SECRET}
    first = daemons.start("periodic-a", ["--migrate"], env=env, mode="polling")
    second = daemons.start("periodic-b", env=env, mode="polling")

    def completed() -> list[tuple[int, str]] | None:
        with psycopg.connect(pg_clean, autocommit=True) as conn:
            rows = conn.execute(
                "SELECT id, idempotency_key FROM background_jobs"
                " WHERE job_type = 'hook:tick' AND status = 'completed' ORDER BY id"
            ).fetchall()
        return [(int(r[0]), str(r[1])) for r in rows] if len(rows) >= 4 else None

    done = poll_until(completed, timeout_s=30, interval_s=0.1, what="four periodic jobs done")
    for daemon in (first, second):
        daemon.send(signal.SIGTERM)
    assert first.wait(15) == 0 and second.wait(15) == 0

    with psycopg.connect(pg_clean, autocommit=True) as conn:
        keys = [str(r[0]) for r in conn.execute(
            "SELECT idempotency_key FROM background_jobs WHERE job_type = 'hook:tick'"
        ).fetchall()]
    assert len(keys) == len(set(keys))  # one job per slot
    posts = Counter(r.json()["id"] for r in endpoint.requests)
    first_id = done[0][0]
    assert posts[first_id] == 2  # 503, then 200
    assert all(posts[job_id] == 1 for job_id, _ in done[1:])
    for request in endpoint.requests:
        assert verify(SECRET.encode(), request.body, request.headers[SIGNATURE_HEADER])
        assert request.json()["queue"] == "scheduled_jobs"
    enqueuers = {e["worker_id"] for d in (first, second) for e in d.events("periodic_enqueued")}
    assert enqueuers  # the daemons log who enqueued each slot
    for daemon in (first, second):
        daemon.assert_clean_output()
        assert SECRET not in daemon.log_text()
