"""A handler module that registers a job type wrongly, started as a user starts it
(``gochatd --handlers badapp.X`` in the directory that holds ``badapp/``): one line naming
the real problem, exit 2, before anything is served."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.badinput.support import one_line_error, run_gochatd

MODULES = {
    "badname": '@gochatd.job("bad type with spaces")\nasync def h(ctx): ...\n',
    "twice": ('@gochatd.job("report:build")\nasync def first(ctx): ...\n\n'
              '@gochatd.job("report:build")\nasync def second(ctx): ...\n'),
    "noop": '@gochatd.job("sys:noop")\nasync def mine(ctx): ...\n',
    "badqueue": '@gochatd.job("report:build", queue="no spaces please")\nasync def h(ctx): ...\n',
}


@pytest.fixture
def app_dir(tmp_path: Path) -> Path:
    (tmp_path / "badapp").mkdir()
    (tmp_path / "badapp" / "__init__.py").write_text("")
    for name, body in MODULES.items():
        (tmp_path / "badapp" / f"{name}.py").write_text(f"import gochatd\n\n{body}")
    (tmp_path / "badapp" / "again.py").write_text(  # the same function imported twice: fine
        "import importlib\n\nimport badapp.good\n\nimportlib.reload(badapp.good)\n")
    (tmp_path / "badapp" / "good.py").write_text(
        'import gochatd\n\n@gochatd.job("report:build")\nasync def build(ctx): ...\n')
    return tmp_path


@pytest.mark.parametrize(("module", "expect"), [
    ("badname", "handlers: badapp.badname: job type 'bad type with spaces': expected letters"),
    ("twice", "job type 'report:build' is already handled by badapp.twice.first; "
              "badapp.twice.second cannot register it too"),
    ("noop", "job type 'sys:noop' is built in (badapp.noop.mine cannot replace it)"),
    ("badqueue", "report:build: queue 'no spaces please': expected 1-64 letters"),
])
@pytest.mark.parametrize("command", [[], ["config", "check"]])
def test_a_bad_registration_is_one_line_naming_it(
    app_dir: Path, module: str, expect: str, command: list[str]
) -> None:
    url = f"sqlite:///{app_dir / 'jobs.db'}"
    result = run_gochatd([*command, "--handlers", f"badapp.{module}", "--database-url", url],
                         cwd=app_dir)
    problem = one_line_error(result.returncode, result.stdout, result.stderr, expect)
    assert problem is None, problem
    assert "cannot import module" not in result.stderr


def test_the_same_handler_imported_twice_is_no_conflict(app_dir: Path) -> None:
    result = run_gochatd(["config", "check", "--handlers", "badapp.again"], cwd=app_dir)
    assert result.returncode == 0, result.stderr
