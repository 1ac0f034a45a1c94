"""The service docstring's nursery tree is the truth: every loop ``run()`` starts is drawn
there, with the module it lives in."""

from __future__ import annotations

import inspect
from pathlib import Path

import gochatd.worker.service
from gochatd.config.settings import Settings
from gochatd.outbox.providers import ChannelConfig
from gochatd.worker.service import Worker

PACKAGE = Path(gochatd.worker.service.__file__).resolve().parent.parent


def _module_path(method: object) -> str:
    owner = getattr(method, "__self__", None)
    assert owner is not None, f"{method!r} is not a component's bound method"
    source = inspect.getsourcefile(type(owner))
    assert source is not None
    return Path(source).resolve().relative_to(PACKAGE).as_posix()


def test_every_started_loop_is_in_the_docstring_tree(tmp_path: Path) -> None:
    settings = Settings(
        database_url=f"sqlite:///{tmp_path / 'w.db'}", redis_url="redis://127.0.0.1:1/0",
        periodic={"sys:noop": {"every": "1m"}},
        outbox_channels={"hooks": ChannelConfig("hooks", url="http://127.0.0.1:1/hook")},
    )
    worker = Worker(settings)
    loops = worker._root_loops()
    assert len(loops) == 13  # everything but the watchdog (no $NOTIFY_SOCKET here)
    tree = gochatd.worker.service.__doc__ or ""
    drawn = {_module_path(loop) for loop in loops}
    drawn |= {_module_path(worker.intake.run), _module_path(worker.capped_backlog.run),
              _module_path(worker.watchdog.run), _module_path(worker.pool.serve)}
    for module in sorted(drawn):
        assert module in tree, f"{module} is started but not drawn in service.py's tree"
    # And nothing is drawn that is not started: the loops above, the two servers
    # (``_start_servers``) and the runners (one per job, in the pool).
    drawn |= {"admin/server.py", "gateway/server.py", "worker/runner.py"}
    for line in tree.splitlines():
        if "──" in line and line.rstrip().endswith(".py"):
            assert line.split()[-1] in drawn, line
