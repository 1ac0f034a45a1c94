"""``@gochatd.job(..., runtime=...)``: the runtime is chosen by the function's kind when left
out, and a value that is unknown or does not fit the function is refused at registration in
one line, by the decorator and by the command line that imports the handler module."""

from __future__ import annotations

from pathlib import Path

import pytest

from gochatd.context import JobContext
from gochatd.errors import InvalidHandler
from gochatd.worker.registry import REGISTRY, handler_spec, job
from tests.badinput.support import one_line_error, run_gochatd


async def _async_handler(ctx: JobContext) -> None:
    return None


def _sync_handler(ctx: JobContext) -> None:
    return None


def test_the_runtime_follows_the_function_when_left_out() -> None:
    assert handler_spec("t:a", _async_handler).runtime == "trio"
    assert handler_spec("t:s", _sync_handler).runtime == "thread"
    assert handler_spec("t:aio", _async_handler, runtime="asyncio").runtime == "asyncio"
    trio_spec = handler_spec("t:a", _async_handler)
    assert trio_spec.fn is _async_handler  # a Trio handler is awaited as written


@pytest.mark.parametrize(("fn", "runtime", "message"), [
    (_async_handler, "gevent",
     "@gochatd.job('t:x', runtime='gevent'): runtime must be 'trio', 'asyncio' or 'thread', "
     "got 'gevent'"),
    (_async_handler, "thread",
     "@gochatd.job('t:x', runtime='thread'): _async_handler is an async def; runtime 'thread' "
     "runs a plain def (use runtime='trio' or 'asyncio' for an async def)"),
    (_sync_handler, "asyncio",
     "@gochatd.job('t:x', runtime='asyncio'): _sync_handler is a plain def; runtime 'asyncio' "
     "runs an async def (a plain def runs with runtime='thread')"),
    (_sync_handler, "trio",
     "@gochatd.job('t:x', runtime='trio'): _sync_handler is a plain def; runtime 'trio' "
     "runs an async def (a plain def runs with runtime='thread')"),
])
def test_a_runtime_that_does_not_fit_is_refused_in_one_line(
    fn: object, runtime: str, message: str
) -> None:
    with pytest.raises(InvalidHandler) as refused:
        job("t:x", runtime=runtime)(fn)  # type: ignore[type-var]
    assert str(refused.value) == message and "\n" not in message
    assert isinstance(refused.value, ValueError)
    assert REGISTRY.get("t:x") is None


def test_the_command_line_reports_a_refused_handler_in_one_line(tmp_path: Path) -> None:
    (tmp_path / "bad_runtime_jobs.py").write_text(
        "import gochatd\n\n"
        "@gochatd.job('report:build', runtime='asyncio')\n"
        "def build(ctx):\n"
        "    pass\n",
        encoding="utf-8",
    )
    got = run_gochatd(["config", "check", "--handlers", "bad_runtime_jobs"], cwd=tmp_path)
    problem = one_line_error(
        got.returncode, got.stdout, got.stderr,
        "handlers: bad_runtime_jobs: @gochatd.job('report:build', runtime='asyncio'): build is "
        "a plain def; runtime 'asyncio' runs an async def")
    assert problem is None, problem
