"""Hooks registered at module level in a ``--handlers`` module run in a real daemon process
around every job (docs/hooks.md); a hook's exception retries the job with the hook named in
its stored error, and the daemon keeps running."""

from __future__ import annotations

import json
from pathlib import Path

from tests.support.daemon_process import DaemonFactory, run_cli
from tests.support.hooked_handlers import HOOKED


def test_a_daemon_runs_the_hooks_of_its_handler_modules(
    tmp_path: Path, daemons: DaemonFactory
) -> None:
    env = {"GOCHAT_DATABASE_URL": f"sqlite:///{tmp_path / 'jobs.db'}", "GOCHAT_LOG_FORMAT": "json"}
    daemon = daemons.start("hooked", ["--handlers", "tests.support.hooked_handlers"], env=env,
                           cwd=tmp_path)
    ids = []
    for payload in ('{"n": 1}', '{"refuse": "secret-token"}'):
        done = run_cli(["enqueue", HOOKED, "--payload", payload], env, cwd=tmp_path)
        assert done.returncode == 0, done.stderr
        ids.append(json.loads(done.stdout)["id"])
    ok, refused = ids
    daemon.wait_for_event("job_completed", lambda e: e.get("job_id") == ok)
    daemon.wait_for_event("job_dead", lambda e: e.get("job_id") == refused, timeout_s=30)
    [ran] = daemon.events("e2e_handler_ran")
    assert ran["job_id"] == ok
    # The refusing before hook is registered first (outermost): the inner hooks never saw
    # the refused job's attempts.
    after = {e["job_id"]: e["error_class"] for e in daemon.events("e2e_hook_after")}
    assert after == {ok: None}
    assert [e["job_id"] for e in daemon.events("e2e_middleware_in")] == [ok]
    assert len(daemon.events("job_retry")) == 1  # the refused job's first attempt
    shown = run_cli(["jobs", "show", str(refused), "--json"], env, cwd=tmp_path)
    job = json.loads(shown.stdout)
    assert (job["status"], job["error_class"]) == ("dead", "PermissionError")
    assert job["last_error"].startswith("before_job hook tests.support.hooked_handlers."
                                        "refuse_when_asked failed: PermissionError: ")
    assert "secret-token" not in job["last_error"]
    assert daemon.stop() == 0
    daemon.assert_clean_output()
