"""The unit files: ``systemd-analyze verify`` finds nothing to complain about, the directives
issue #3 asks for are there, and ExecStart's command line is one gochatd accepts.

``systemd-analyze`` is required (Debian package ``systemd``; ``.ci/test`` installs it): its
absence fails these tests, it never skips them."""

from __future__ import annotations

import os
import re
import shutil
import subprocess
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

from gochatd.config.settings import FIELDS, Settings, load_settings
from gochatd.worker.pool import UNWIND_S
from gochatd.worker.service import ADMIN_GRACE_S, FINAL_FLUSH_S
from tests.support.daemon_process import GOCHATD, REPO_ROOT, run_cli

UNITS = ("gochatd.service", "gochatd-worker.service", "gochatd-worker@.service")
#: The template, N workers per host (``systemctl start gochatd-worker@{1..4}``).
TEMPLATE = "gochatd-worker@.service"
INSTALLED_BINARY = "/usr/local/bin/gochatd"
#: The repository's own virtualenv binary, as the test suite runs it.
VENV_BINARY = REPO_ROOT / ".venv" / "bin" / "gochatd"


def systemd_analyze() -> str:
    found = shutil.which("systemd-analyze")
    if found is None:
        where = "CI" if os.environ.get("CI") else "this machine"
        pytest.fail(
            f"systemd-analyze is required on {where} to verify systemd/*.service "
            "(Debian/Ubuntu: apt-get install systemd; .ci/test installs it when apt-get exists)",
            pytrace=False,
        )
    return found


def gochatd_binary() -> Path:
    binary = VENV_BINARY if VENV_BINARY.exists() else Path(GOCHATD)
    assert binary.is_absolute() and os.access(binary, os.X_OK), f"no gochatd binary at {binary}"
    return binary


@dataclass(frozen=True)
class Unit:
    name: str
    text: str
    directives: dict[str, list[str]]  # "Section.Key" -> values in order

    def one(self, key: str) -> str:
        values = self.directives.get(key, [])
        assert len(values) == 1, f"{self.name}: expected one {key}=, got {values}"
        return values[0]

    def all(self, key: str) -> list[str]:
        return self.directives.get(key, [])


def read_unit(name: str) -> Unit:
    text = (REPO_ROOT / "systemd" / name).read_text(encoding="utf-8")
    directives: dict[str, list[str]] = {}
    section = ""
    for line in text.splitlines():
        line = line.strip()
        if not line or line.startswith(("#", ";")):
            continue
        if line.startswith("[") and line.endswith("]"):
            section = line[1:-1]
            continue
        key, sep, value = line.partition("=")
        assert sep, f"{name}: not a KEY=VALUE line: {line!r}"
        directives.setdefault(f"{section}.{key.strip()}", []).append(value.strip())
    return Unit(name, text, directives)


@pytest.fixture
def verifiable_units(tmp_path: Path) -> Iterator[list[Path]]:
    """Copies of the units whose ExecStart runs the real gochatd of this checkout (verify
    refuses a binary that does not exist)."""
    binary = gochatd_binary()
    copies = []
    for name in UNITS:
        text = (REPO_ROOT / "systemd" / name).read_text(encoding="utf-8")
        assert f"ExecStart={INSTALLED_BINARY}" in text
        copy = tmp_path / name
        for directive in ("ExecStartPre", "ExecStart"):
            text = text.replace(f"{directive}={INSTALLED_BINARY}", f"{directive}={binary}")
        copy.write_text(text, encoding="utf-8")
        copies.append(copy)
    yield copies


def run_verify(units: list[Path]) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [systemd_analyze(), "verify", "--man=no", *map(str, units)],
        capture_output=True, text=True, timeout=60, check=False, stdin=subprocess.DEVNULL,
        env={**os.environ, "SYSTEMD_LOG_COLOR": "0", "SYSTEMD_PAGER": ""},
    )


def complaints_about(result: subprocess.CompletedProcess[str], units: list[Path]) -> list[str]:
    """Output lines that name one of our units (verify may also mention system units)."""
    names = {u.name for u in units} | {str(u) for u in units}
    return [line for line in (result.stdout + result.stderr).splitlines()
            if any(n in line for n in names)]


# -- systemd-analyze ---------------------------------------------------------------------------


def test_systemd_analyze_verify_reports_no_errors(verifiable_units: list[Path]) -> None:
    result = run_verify(verifiable_units)
    output = result.stdout + result.stderr
    assert result.returncode == 0, output
    assert complaints_about(result, verifiable_units) == [], output


def test_verify_would_catch_a_bad_directive(verifiable_units: list[Path]) -> None:
    """The check above is not vacuous: the same verify flags a typo and a bad value."""
    broken = verifiable_units[0]
    broken.write_text(broken.read_text(encoding="utf-8").replace(
        "WatchdogSec=30", "WatchdogSec=thirty\nWatchDogSec=30"), encoding="utf-8")
    complaints = complaints_about(run_verify([broken]), [broken])
    assert any("WatchdogSec" in line or "sec value" in line for line in complaints), complaints
    assert any("WatchDogSec" in line for line in complaints), complaints


def test_systemd_analyze_security_rates_the_units_ok(verifiable_units: list[Path]) -> None:
    """Offline exposure score below 2.0 ("OK"): the hardening directives take effect."""
    result = subprocess.run(
        [systemd_analyze(), "security", "--offline=yes", "--threshold=19", "--no-pager",
         *map(str, verifiable_units)],
        capture_output=True, text=True, timeout=60, check=False, stdin=subprocess.DEVNULL,
        env={**os.environ, "SYSTEMD_LOG_COLOR": "0", "SYSTEMD_PAGER": ""},
    )
    assert result.returncode == 0, result.stdout + result.stderr
    scores = re.findall(r"Overall exposure level for (\S+): ([\d.]+)", result.stdout)
    # A template is rated as the instance "i" (gochatd-worker@i.service).
    rated = sorted(name.replace("@i.", "@.") for name, _ in scores)
    assert rated == sorted(UNITS), result.stdout


# -- what issue #3 asks of the units -----------------------------------------------------------


@pytest.mark.parametrize("name", UNITS)
def test_unit_directives(name: str) -> None:
    unit = read_unit(name)
    expected = {
        "Service.Type": "notify",
        "Service.NotifyAccess": "main",
        "Service.WatchdogSec": "30",
        "Service.Restart": "on-failure",
        "Service.KillMode": "mixed",
        "Service.KillSignal": "SIGTERM",
        "Service.RestartPreventExitStatus": "2",
        "Service.ExecReload": "/bin/kill -HUP $MAINPID",
        "Service.ProtectSystem": "strict",
        "Service.NoNewPrivileges": "yes",
        "Service.PrivateTmp": "yes",
        "Service.ProtectHome": "yes",
        "Service.DynamicUser": "yes",
        "Install.WantedBy": "multi-user.target",
    }
    for key, value in expected.items():
        assert unit.one(key) == value, f"{name}: {key}"
    assert unit.all("Service.EnvironmentFile")[0] == "-/etc/gochatd/gochatd.env"
    # The stop timeout covers the whole graceful stop, not just the handlers' grace.
    grace = next(f.default for f in FIELDS if f.key == "worker.shutdown_grace_s")
    assert isinstance(grace, float)
    assert int(unit.one("Service.TimeoutStopSec")) > grace + UNWIND_S + FINAL_FLUSH_S + ADMIN_GRACE_S


def test_the_worker_unit_runs_worker_only() -> None:
    assert read_unit("gochatd.service").one("Service.ExecStart") == f"{INSTALLED_BINARY} serve"
    assert read_unit("gochatd-worker.service").one("Service.ExecStart") == (
        f"{INSTALLED_BINARY} --worker-only"
    )
    assert read_unit(TEMPLATE).one("Service.ExecStart") == (
        f"{INSTALLED_BINARY} --worker-only --admin-listen unix:%t/gochatd/worker-%i/admin.sock"
    )


def test_each_template_instance_has_a_runtime_directory_of_its_own() -> None:
    """The admin socket's directory is the instance's RuntimeDirectory (/run/gochatd/
    worker-N: created at start, removed at stop), and instance N may have its own env file."""
    unit = read_unit(TEMPLATE)
    assert unit.one("Service.RuntimeDirectory") == "gochatd/worker-%i"
    assert unit.one("Service.RuntimeDirectoryMode") == "0750"
    assert unit.all("Service.EnvironmentFile") == [
        "-/etc/gochatd/gochatd.env", "-/etc/gochatd/gochatd-worker.env",
        "-/etc/gochatd/gochatd-worker-%i.env"]


@pytest.mark.parametrize("name", UNITS)
def test_exec_start_arguments_are_accepted_by_gochatd(name: str, tmp_path: Path) -> None:
    """ExecStart's arguments parse: ``gochatd config check`` takes the same options as serve."""
    argv = read_unit(name).one("Service.ExecStart").split()
    assert argv[0] == INSTALLED_BINARY
    args = argv[1:]
    if args and args[0] == "serve":
        args = args[1:]
    result = run_cli(["config", "check", *args],
                     {"GOCHAT_DATABASE_URL": f"sqlite:///{tmp_path / 'x.db'}"}, cwd=tmp_path)
    assert result.returncode == 0, result.stderr
    assert "admin.listen" in result.stdout


@pytest.mark.parametrize("name", UNITS)
def test_the_schema_is_applied_before_the_daemon_starts(name: str, tmp_path: Path) -> None:
    """Without it, a PostgreSQL daemon exits 2 (no schema) and RestartPreventExitStatus=2
    leaves the unit dead. ExecStartPre runs ``gochatd db upgrade``: it creates the schema,
    and a second run (every restart) changes nothing."""
    argv = read_unit(name).one("Service.ExecStartPre").split()
    assert argv[0] == INSTALLED_BINARY and argv[1:] == ["db", "upgrade"]
    env = {"GOCHAT_DATABASE_URL": f"sqlite:///{tmp_path / 'jobs.db'}"}
    first = run_cli(argv[1:], env, cwd=tmp_path)
    assert first.returncode == 0, first.stderr
    assert first.stdout.startswith("applied: 0001_background_jobs")
    again = run_cli(argv[1:], env, cwd=tmp_path)
    assert (again.returncode, again.stdout) == (0, "schema is up to date\n"), again.stderr
    serve_args = read_unit(name).one("Service.ExecStart").split()[1:]
    check = run_cli(["config", "check", *[a for a in serve_args if a != "serve"]], env, cwd=tmp_path)
    assert check.returncode == 0, check.stderr


@pytest.mark.parametrize("name", [*UNITS, "gochatd.env.example"])
def test_no_placeholders_are_shipped(name: str) -> None:
    """What a user copies as is must not point at made-up places; the env example's only
    placeholder is the database credentials, which its header says to edit."""
    text = (REPO_ROOT / "systemd" / name).read_text(encoding="utf-8")
    active = [line for line in text.splitlines() if line.strip() and not line.startswith("#")]
    for line in active:
        for placeholder in ("example.invalid", "/src/", "myapp"):
            assert placeholder not in line, f"{name}: {line}"


def test_the_example_environment_file_holds_known_valid_keys() -> None:
    path = REPO_ROOT / "systemd" / "gochatd.env.example"
    env: dict[str, str] = {}
    for line in path.read_text(encoding="utf-8").splitlines():
        if line.strip() and not line.lstrip().startswith("#"):
            key, sep, value = line.partition("=")
            assert sep and key == key.strip(), f"not KEY=VALUE: {line!r}"
            env[key] = value
    known = {f.env for f in FIELDS}
    assert set(env) <= known, set(env) - known
    assert {"GOCHAT_ADMIN_LISTEN", "GOCHAT_ADMIN_TOKEN"} <= set(env)
    commented = path.read_text(encoding="utf-8")
    assert "#GOCHAT_ADMIN_MAX_BODY_BYTES=" in commented
    settings = load_settings(env=env, config_file=os.devnull)
    assert isinstance(settings, Settings)
    assert settings.admin_listen == "127.0.0.1:8410" and settings.admin_token == ""
    assert settings.sources.get("_unknown_env") is None
