"""The README's Quickstart and its Python client, as written, with the installed command and
its virtualenv's Python: ``gochatd`` in an empty directory (the embedded SQLite default),
``gochatd enqueue`` and ``gochatd jobs list --status completed`` in another terminal, the
Trio and asyncio client snippets saved and run, Ctrl-C: exit 0."""

from __future__ import annotations

import json
import re
import signal
import subprocess
from pathlib import Path

from tests.support import installed
from tests.support.daemon_process import REPO_ROOT, DaemonFactory, child_env, poll_until, run_cli

README = (REPO_ROOT / "README.md").read_text(encoding="utf-8")


def _blocks(section: str, language: str) -> list[str]:
    """The fenced ``language`` blocks between the heading ``section`` and the next one."""
    start = README.index(f"\n{section}\n")
    end = README.find("\n## ", start + 1)
    return re.findall(rf"```{language}\n(.*?)```", README[start:end if end > 0 else None], re.S)


def _commands(block: str) -> list[list[str]]:
    """``.venv/bin/gochatd ARGS`` lines of a sh block, as argument lists (no shell)."""
    out = []
    for line in block.splitlines():
        line = line.strip()
        if line.startswith(".venv/bin/gochatd "):
            out.append(re.findall(r"'[^']*'|\S+", line)[1:])
    return [[a.strip("'") for a in args] for args in out]


def _python(script: Path) -> list[str]:
    result = subprocess.run([str(installed.python()), script.name], cwd=script.parent,
                            env=child_env(), capture_output=True, text=True, timeout=120,
                            check=False)
    assert result.returncode == 0, result.stdout + result.stderr
    assert "Traceback" not in result.stderr, result.stderr
    return result.stdout.splitlines()


def test_the_quickstart_and_the_client_snippets_as_written(
    tmp_path: Path, daemons: DaemonFactory
) -> None:
    install, terminal = _blocks("## Quickstart", "sh")[:2]
    assert install.strip().endswith(".venv/bin/gochatd")  # the daemon: no arguments at all
    daemon = daemons.start("quickstart", [], {"GOCHAT_LOG_FORMAT": "json"}, cwd=tmp_path,
                           mode="polling")
    assert daemon.events("worker_starting")[0]["database_file"] == str(tmp_path / "gochatd.db")

    enqueue, listing = _commands(terminal)
    assert enqueue[0] == "enqueue" and listing[:2] == ["jobs", "list"]
    queued = run_cli(enqueue, cwd=tmp_path)
    assert queued.returncode == 0, queued.stderr
    job = json.loads(queued.stdout)
    assert (job["job_type"], job["payload"]) == ("sys:noop", {"hello": "world"})

    def listed() -> list[str] | None:
        result = run_cli(listing, cwd=tmp_path)
        assert result.returncode == 0, result.stderr
        rows = [line.split() for line in result.stdout.splitlines()[1:]]
        return [r[1] for r in rows if r and r[0] == str(job["id"])] or None

    assert poll_until(listed, timeout_s=60, what="the job listed as completed") == ["completed"]

    client = _blocks("## Python client", "python")
    trio_snippet = next(b for b in client if "trio.run(main)" in b)
    (tmp_path / "enqueue_demo.py").write_text(trio_snippet, encoding="utf-8")
    first, status, cancelled = _python(tmp_path / "enqueue_demo.py")
    _job_id, job_status, batch, created = first.split()
    assert (job_status, batch, created) == ("queued", "1001", "True")
    assert (status, cancelled) == ("completed", "cancelled")  # as the snippet's comments say

    asyncio_snippet = next(b for b in client if "asyncio.run(main())" in b)
    (tmp_path / "asyncio_demo.py").write_text(asyncio_snippet, encoding="utf-8")
    assert _python(tmp_path / "asyncio_demo.py") == []

    daemon.send(signal.SIGINT)  # Ctrl-C
    assert daemon.wait(60) == 0
    assert daemon.events("worker_stopped")[-1]["forced"] is False
    daemon.assert_clean_output()
