"""The ``gochatd`` the end-to-end tier runs: a **non-editable** install of this checkout
(``pip install .``) into a virtualenv of its own, ``build/installed-venv``, so the tests take
the path a user's ``pip install .`` takes: the wheel's files (SQL and dashboard as package
data), the console script, real signals, stdout and stderr.

Built once per test session (``installed_gochatd``, tests/e2e/conftest.py). The virtualenv
and its dependencies are kept between sessions while pyproject.toml's dependencies and the
Python version are unchanged; the package in it is reinstalled (``--no-deps
--force-reinstall``, a few seconds) only when the package's files changed. Two stamp files
say what each was built from, so a session never rewrites an install that another session,
started earlier from the same files, is running. A first build installs the dependencies
through pip's cache. ``GOCHAT_TEST_INSTALLED_VENV`` names another place.
"""

from __future__ import annotations

import contextlib
import fcntl
import hashlib
import os
import shutil
import subprocess
import sys
import tomllib
from collections.abc import Iterator
from pathlib import Path

from tests.support.daemon_process import REPO_ROOT

VENV = Path(os.environ.get("GOCHAT_TEST_INSTALLED_VENV", REPO_ROOT / "build" / "installed-venv"))
PIP_FLAGS = ("-q", "--disable-pip-version-check")


def _stamp(extras: str = "") -> str:
    """What the kept virtualenv's dependencies were installed for."""
    project = tomllib.loads((REPO_ROOT / "pyproject.toml").read_text(encoding="utf-8"))["project"]
    wanted = list(project["dependencies"])
    for extra in filter(None, extras.split(",")):
        wanted += [f"[{extra}]", *project["optional-dependencies"][extra]]
    deps = "\n".join(sorted(wanted))
    return hashlib.sha256(f"{sys.version}\n{deps}".encode()).hexdigest()


def _source_stamp() -> str:
    """What the package is built from: every file of the wheel's folders, and pyproject."""
    digest = hashlib.sha256()
    files = [REPO_ROOT / "pyproject.toml", REPO_ROOT / "README.md"]
    for folder in ("daemon", "admin", "sql"):
        files += sorted(p for p in (REPO_ROOT / folder).rglob("*")
                        if p.is_file() and "__pycache__" not in p.parts)
    for path in files:
        digest.update(str(path.relative_to(REPO_ROOT)).encode() + b"\0" + path.read_bytes())
    return digest.hexdigest()


@contextlib.contextmanager
def _locked(path: Path) -> Iterator[None]:
    """One build at a time, also across pytest sessions started in the same checkout."""
    path.parent.mkdir(parents=True, exist_ok=True)
    with path.open("w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        yield


def _pip(venv: Path, *args: str) -> None:
    # setuptools builds in the checkout's build/: a module deleted since the last build
    # would otherwise still be in build/lib and so in the wheel.
    for stale in [REPO_ROOT / "build" / "lib", *(REPO_ROOT / "build").glob("bdist.*")]:
        shutil.rmtree(stale, ignore_errors=True)
    result = subprocess.run([str(venv / "bin" / "python"), "-m", "pip", "install", *PIP_FLAGS, *args],
                            cwd=REPO_ROOT, capture_output=True, text=True, timeout=900, check=False)
    if result.returncode != 0:
        raise RuntimeError(f"pip install {' '.join(args)} into {venv} failed:\n"
                           f"{result.stdout[-3000:]}\n{result.stderr[-3000:]}")


def build(venv: Path = VENV, extras: str = "") -> Path:
    """``venv``'s ``gochatd``, installed from this checkout as ``pip install .`` does
    (``pip install '.[extras]'`` with ``extras``, a comma-separated list)."""
    deps_file, source_file = venv / ".gochatd-deps", venv / ".gochatd-source"
    with _locked(venv.with_name(venv.name + ".lock")):
        deps, source = _stamp(extras), _source_stamp()
        kept = (venv / "bin" / "python").exists() and _read(deps_file) == deps
        if not kept:
            shutil.rmtree(venv, ignore_errors=True)
            subprocess.run([sys.executable, "-m", "venv", str(venv)], check=True, timeout=300)
            _pip(venv, f"{REPO_ROOT}[{extras}]" if extras else str(REPO_ROOT))
            deps_file.write_text(deps)
        elif _read(source_file) != source:
            source_file.unlink(missing_ok=True)  # a build cut short is no build
            _pip(venv, "--no-deps", "--force-reinstall", str(REPO_ROOT))
        source_file.write_text(source)
    binary = venv / "bin" / "gochatd"
    assert binary.exists(), f"{binary} missing after pip install"
    return binary


def _read(path: Path) -> str | None:
    return path.read_text() if path.exists() else None


def python(venv: Path = VENV) -> Path:
    """The installed virtualenv's interpreter: a user's scripts next to their gochatd."""
    return venv / "bin" / "python"
