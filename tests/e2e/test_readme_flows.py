"""The README's own flows, done as written by a new user: the "Writing a handler" module saved
beside the project and run with ``--handlers``, and that saved module not breaking the
project's own checks."""

from __future__ import annotations

import json
import re
import shutil
import subprocess
import sys
from pathlib import Path

from tests.support.daemon_process import REPO_ROOT, DaemonFactory, poll_until, run_cli
from tests.support.redis_server import free_port

README = (REPO_ROOT / "README.md").read_text(encoding="utf-8")


def readme_block(section: str, language: str = "python") -> str:
    """The first fenced ``language`` block after the heading ``section``."""
    start = README.index(f"\n{section}\n")
    match = re.compile(rf"```{language}\n(.*?)```", re.S).search(README, start)
    assert match is not None, f"no {language} block under {section!r}"
    return match.group(1)


def recipe_payload(job_type: str) -> dict[str, int]:
    """The payload the framework recipes (docs/recipes/) enqueue for ``job_type``: the same
    keys in every recipe, each given an int, as the views' URL parameters are."""
    found = set()
    for recipe in sorted((REPO_ROOT / "docs" / "recipes").glob("*.py")):
        calls = re.findall(rf'enqueue\(\s*"{re.escape(job_type)}",\s*\{{([^}}]*)\}}',
                           recipe.read_text(encoding="utf-8"))
        assert calls, f"{recipe.name} enqueues no {job_type}"
        found |= {tuple(sorted(re.findall(r'"(\w+)":', call))) for call in calls}
    [keys] = found
    return {key: n for n, key in enumerate(keys, start=1)}


def _write_readme_handler(project: Path) -> str:
    code = readme_block("## Writing a handler")
    first = code.splitlines()[0]
    assert first.startswith("# ") and first.endswith(".py"), "the block names its file"
    path = project / first[2:].strip()
    path.parent.mkdir(parents=True)
    path.write_text(code, encoding="utf-8")
    return ".".join(path.relative_to(project).with_suffix("").parts)


def test_the_handler_module_runs_from_the_project_directory(
    tmp_path: Path, daemons: DaemonFactory
) -> None:
    """README: save myapp/jobs.py, run ``gochatd --handlers myapp.jobs`` in that directory."""
    module = _write_readme_handler(tmp_path)
    assert module == "myapp.jobs"
    match = re.search(r'@gochatd\.job\("([^"]+)", queue="([^"]+)"', readme_block("## Writing a handler"))
    assert match is not None
    job_type, queue = match.groups()
    env = {"GOCHAT_LOG_FORMAT": "json"}
    daemons.start("readme", ["--handlers", module, "--queues", f"{queue},default"], env,
                  cwd=tmp_path)

    def enqueue(payload: dict[str, object]) -> int:
        result = run_cli(["enqueue", job_type, "--queue", queue, "--payload", json.dumps(payload)],
                         env, cwd=tmp_path)
        assert result.returncode == 0, result.stderr
        return int(json.loads(result.stdout)["id"])

    ok = enqueue(recipe_payload(job_type))  # what every framework recipe sends
    refused = enqueue({"conversation_id": 7})

    def statuses() -> dict[int, tuple[str, str | None]] | None:
        result = run_cli(["jobs", "list", "--json"], env, cwd=tmp_path)
        assert result.returncode == 0, result.stderr
        rows = {j["id"]: (j["status"], j["error_class"]) for j in json.loads(result.stdout)}
        done = all(rows.get(i, ("",))[0] in ("completed", "dead") for i in (ok, refused))
        return rows if done else None

    rows = poll_until(statuses, timeout_s=30, what="both README jobs finished")
    assert rows[ok] == ("completed", None)
    assert rows[refused] == ("dead", "non_retryable"), "NonRetryable: dead at once"


def test_a_module_that_does_not_import_is_one_line(tmp_path: Path) -> None:
    (tmp_path / "myapp").mkdir()
    (tmp_path / "myapp" / "jobs.py").write_text("def broken(:\n", encoding="utf-8")
    for module, expect in (("myapp.jobs", "SyntaxError"), ("myapp.nothere", "current directory")):
        result = run_cli(["config", "check", "--handlers", module,
                          "--database-url", f"sqlite:///{tmp_path / 'x.db'}"], cwd=tmp_path)
        assert result.returncode == 2
        assert result.stdout == ""
        [line] = result.stderr.splitlines()
        assert line.startswith("gochatd: handlers:") and expect in line, line


def test_a_handler_module_saved_in_the_checkout_is_not_linted(tmp_path: Path) -> None:
    """The README's snippets saved where it suggests (the project directory) must not make
    ``bash .ci/test`` fail at ruff: ruff checks the project's own folders only."""
    shutil.copy(REPO_ROOT / "pyproject.toml", tmp_path / "pyproject.toml")
    for folder in ("daemon", "myapp"):
        (tmp_path / folder).mkdir()
        (tmp_path / folder / "jobs.py").write_text("import os\n", encoding="utf-8")  # F401
    ruff = Path(sys.executable).parent / "ruff"
    result = subprocess.run([str(ruff), "check", "--no-cache", "--output-format", "concise", "."],
                            cwd=tmp_path, capture_output=True, text=True, check=False)
    assert result.returncode == 1, result.stdout + result.stderr
    flagged = {line.split(":")[0] for line in result.stdout.splitlines() if ":" in line}
    assert flagged == {"daemon/jobs.py"}, result.stdout


def test_a_second_daemon_on_the_same_admin_port_says_so_in_one_line(
    tmp_path: Path, daemons: DaemonFactory
) -> None:
    """Two daemons started with the same command on one host: the second takes the admin
    address the first holds; it exits 2 with one line naming the address and the setting."""
    port = free_port()
    env = {"GOCHAT_ADMIN_LISTEN": f"127.0.0.1:{port}", "GOCHAT_LOG_FORMAT": "json"}
    first = daemons.start("first", ["--database-url", f"sqlite:///{tmp_path / 'a.db'}"], env,
                          cwd=tmp_path)
    second = run_cli(["--database-url", f"sqlite:///{tmp_path / 'b.db'}"], env, cwd=tmp_path)
    assert second.returncode == 2, second.stderr
    error_lines = [line for line in second.stderr.splitlines() if line.startswith("gochatd:")]
    assert error_lines == [
        f"gochatd: admin.listen: 127.0.0.1:{port} is already in use (another gochatd on this "
        "host?); set admin.listen (GOCHAT_ADMIN_LISTEN) to a free port, 127.0.0.1:0 for any, "
        "unix:/path/to.sock, or off"
    ], second.stderr
    assert "Traceback" not in second.stdout + second.stderr
    assert first.alive()


def test_the_sync_client_snippet_runs_as_a_script(tmp_path: Path) -> None:
    """README, "From threads": the block saved as a script runs as written (it imports what
    it uses) against the Quickstart's database, made with ``gochatd db upgrade``."""
    blocks = re.findall(r"```python\n(.*?)```", README[README.index("\n## Python client\n"):],
                        re.S)
    [code] = [b for b in blocks if "gochatd.SyncClient(" in b and "async" not in b]
    upgraded = run_cli(["db", "upgrade", "--database-url", "sqlite:///gochatd.db"], cwd=tmp_path)
    assert upgraded.returncode == 0, upgraded.stderr
    (tmp_path / "snippet.py").write_text(code, encoding="utf-8")
    result = subprocess.run([sys.executable, "snippet.py"], cwd=tmp_path, capture_output=True,
                            text=True, check=False, timeout=60)
    assert result.returncode == 0, result.stderr
    assert result.stdout.strip() == "queued"
