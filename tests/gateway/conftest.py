"""The gateway tests use the admin tests' stacks (SQLite alone, PostgreSQL + Redis)."""

import gochatd  # noqa: F401, I001  # trio_asyncio before psycopg

from tests.admin.conftest import pg_admin, pg_redis_stack, sqlite_stack, stack

__all__ = ["pg_admin", "pg_redis_stack", "sqlite_stack", "stack"]
