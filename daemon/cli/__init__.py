"""The ``gochatd`` command line: ``program.main`` builds the parser from ``program.GROUPS`` and
dispatches. Each command group registers itself with ``add_parser(sub)`` (``parsing.add_group``
names its handler): the core groups here (``serve``, ``enqueue``, ``jobs``, ``db``, ``config``,
``bench``), a feature's in its folder (``gateway/cli.py``, ``periodic_jobs/cli.py``,
``outbox/cli.py``, ``migrate/cli.py``)."""

from typing import Any


def __getattr__(name: str) -> Any:
    # ``gochatd.cli.program:main``, the entry point of installs made before the command line became a
    # package, without loading every command for ``gochatd.cli.argtypes``.
    if name == "main":
        from gochatd.cli.program import main
        return main
    raise AttributeError(f"module 'gochatd.cli.program' has no attribute {name!r}")
