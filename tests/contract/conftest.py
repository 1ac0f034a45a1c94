"""The contract suite runs against every backend and, for each, against both stores the
code uses: the plain SQL store and the routed store the daemon and its tools run on
(migrate/routing/store.py; with no routes it must be indistinguishable). PostgreSQL is also reached
through a pgbouncer in transaction mode (tests/support/pgbouncer.py), with the plain store
only (the routed store adds nothing a pooler could break that the plain one does not show)
and LISTEN on a direct connection (``database_listen_url``)."""

from __future__ import annotations

from collections.abc import AsyncIterator

import pytest

from gochatd.store import JobStore, open_routed_store, open_store

BACKENDS = ("sqlite", "postgres", "pgbouncer")
STORE_CASES = ("sqlite-plain", "sqlite-routed", "postgres-plain", "postgres-routed",
               "pgbouncer-plain")


def pytest_generate_tests(metafunc: pytest.Metafunc) -> None:
    """A test taking ``store`` runs once per case of STORE_CASES, one taking only
    ``backend_url`` once per backend."""
    if "contract_case" in metafunc.fixturenames:
        uses_store = "store" in metafunc.fixturenames
        metafunc.parametrize("contract_case", STORE_CASES if uses_store else BACKENDS)


@pytest.fixture
def contract_case() -> str:
    raise AssertionError("parametrized by pytest_generate_tests")


@pytest.fixture
def backend_url(contract_case: str, request: pytest.FixtureRequest) -> str:
    backend = contract_case.partition("-")[0]
    if backend == "sqlite":
        return str(request.getfixturevalue("sqlite_url"))
    direct = str(request.getfixturevalue("pg_clean"))
    if backend == "pgbouncer":  # the same (clean) database, through the pooler
        return str(request.getfixturevalue("shared_pgbouncer").url)
    return direct


@pytest.fixture
async def store(
    backend_url: str, contract_case: str, request: pytest.FixtureRequest
) -> AsyncIterator[JobStore]:
    routed = contract_case.endswith("-routed")
    direct = (str(request.getfixturevalue("pg_clean"))
              if contract_case.startswith("pgbouncer") else None)
    s = (open_routed_store(backend_url) if routed
         else open_store(backend_url, listen_url=direct))
    await s.open()
    await s.migrate()
    try:
        yield s
    finally:
        await s.close()
