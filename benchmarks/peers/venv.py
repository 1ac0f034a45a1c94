"""The peers' own virtualenv (``benchmarks/peers/.venv``), never the project's ``.venv``.

It holds the pinned peers of ``requirements.txt`` and gochatd installed editable from this
checkout, so the measured daemon is the working tree. It is (re)filled when either
``requirements.txt`` or the repo's ``pyproject.toml`` changed since the last install.
"""

from __future__ import annotations

import hashlib
import os
import subprocess
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
VENV = os.path.join(HERE, ".venv")
REQUIREMENTS = os.path.join(HERE, "requirements.txt")
STAMP = os.path.join(VENV, ".peers-installed")


def _fingerprint(repo: str) -> str:
    digest = hashlib.sha256()
    for path in (REQUIREMENTS, os.path.join(repo, "pyproject.toml")):
        with open(path, "rb") as f:
            digest.update(f.read())
    return digest.hexdigest()


def ensure_venv(repo: str, *, log: str) -> str:
    """Create or update the venv; return its python. pip's output goes to ``log``."""
    python = os.path.join(VENV, "bin", "python")
    wanted = _fingerprint(repo)
    if os.path.exists(STAMP):
        with open(STAMP) as f:
            if f.read().strip() == wanted:
                return python
    print(f"peers: installing the peers into {os.path.relpath(VENV, repo)} (pip log: {log})", flush=True)
    with open(log, "ab") as out:
        if not os.path.exists(python):
            subprocess.run([sys.executable, "-m", "venv", VENV], check=True, stdout=out, stderr=out)
        subprocess.run([python, "-m", "pip", "install", "-q", "-r", REQUIREMENTS, "-e", repo],
                       check=True, stdout=out, stderr=out)
    with open(STAMP, "w") as f:
        f.write(wanted + "\n")
    return python
