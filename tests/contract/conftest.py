"""The contract suite runs against every backend (tests/conftest.py: ``backend_url``) and, for
each, against both stores the code uses: the plain SQL store and the routed store the daemon
and its tools run on (store/router.py; with no routes it must be indistinguishable)."""

from __future__ import annotations

from collections.abc import AsyncIterator

import pytest

from gochatd.store import JobStore, open_routed_store, open_store


@pytest.fixture(params=["plain", "routed"])
async def store(backend_url: str, request: pytest.FixtureRequest) -> AsyncIterator[JobStore]:
    s = open_store(backend_url) if request.param == "plain" else open_routed_store(backend_url)
    await s.open()
    await s.migrate()
    try:
        yield s
    finally:
        await s.close()
