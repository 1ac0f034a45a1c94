"""Without opentelemetry nothing of it is imported (docs/otel.md): a process that cannot
import it enqueues (Client, SyncClient, a batch) and runs a job with no OpenTelemetry module
loaded. The installed daemon's run: tests/e2e/test_otel_export.py."""

from __future__ import annotations

import subprocess
import sys
import textwrap
from pathlib import Path

BLOCKED_RUN = textwrap.dedent("""
    import sys

    class Blocked:
        def find_spec(self, name, path=None, target=None):
            if name == "opentelemetry" or name.startswith("opentelemetry."):
                raise ModuleNotFoundError(f"No module named {name!r}")
            return None

    sys.meta_path.insert(0, Blocked())
    import trio
    import gochatd
    from gochatd.obs import otel
    from gochatd.testing import migrate, run_job

    async def main(url):
        await migrate(url)
        async with gochatd.Client(url) as client:
            await client.enqueue("sys:noop", {"n": 1})
            await client.enqueue_many([gochatd.NewJob("sys:noop", {"n": 2})])
        with gochatd.SyncClient(url) as sync:
            sync.enqueue("sys:noop", {"n": 3})
        return await run_job("sys:noop", {"n": 4})

    outcome = trio.run(main, sys.argv[1])
    print(otel.SPANS is None, outcome.status)
    print(sorted(m for m in sys.modules if m.split(".")[0] == "opentelemetry"
                 or m in ("gochatd.obs.otel_spans", "gochatd.obs.otel_setup")))
""")


def test_without_opentelemetry_a_process_imports_none_of_it(tmp_path: Path) -> None:
    done = subprocess.run([sys.executable, "-c", BLOCKED_RUN, f"sqlite:///{tmp_path / 'jobs.db'}"],
                          capture_output=True, text=True, timeout=120, check=False)
    assert done.returncode == 0, done.stderr
    assert done.stdout.splitlines() == ["True completed", "[]"]
