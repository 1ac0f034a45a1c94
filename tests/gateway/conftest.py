"""The gateway tests use the admin tests' stacks (SQLite alone, PostgreSQL + Redis)."""

from tests.admin.conftest import pg_admin, pg_redis_stack, sqlite_stack, stack

__all__ = ["pg_admin", "pg_redis_stack", "sqlite_stack", "stack"]
