"""The framework recipes of docs/frameworks.md (the files in docs/recipes/, which the page
shows verbatim: tests/unit/test_docs_recipes.py), each run in its real framework in-process
against PostgreSQL and Redis: a request enqueues a job and a worker runs it."""

from __future__ import annotations

import importlib.util
import sys
from collections.abc import Callable
from pathlib import Path
from types import ModuleType
from typing import Any

import trio
from psycopg.conninfo import conninfo_to_dict

from gochatd.model import JobFilter, JobStatus
from gochatd.worker.registry import HandlerSpec
from tests.integration.helpers import (
    Tracker,
    make_registry,
    started_worker,
    wait_all_status,
)
from tests.support.harness import make_settings

RECIPES = Path(__file__).resolve().parents[2] / "docs" / "recipes"


def _recipe(name: str) -> ModuleType:
    module_name = f"gochatd_recipe_{name}"
    if module_name in sys.modules:
        return sys.modules[module_name]
    spec = importlib.util.spec_from_file_location(module_name, RECIPES / f"{name}.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[module_name] = module
    spec.loader.exec_module(module)
    return module


async def _requests_run_jobs(
    pg_clean: str, redis_url: str, post: Callable[[list[int]], list[tuple[int, Any]]]
) -> tuple[list[tuple[int, Any]], Tracker]:
    """A worker runs ``message:send_reply``; ``post`` makes the app's requests (on a thread:
    the frameworks block). Every enqueued job completes, once."""
    tracker = Tracker()
    registry = make_registry(HandlerSpec("message:send_reply", tracker.counting()))
    async with started_worker(make_settings(pg_clean, redis_url), registry=registry) as run:
        answers = await trio.to_thread.run_sync(post, [7, 8, 7])
        jobs = await run.worker.store.list_jobs(JobFilter(job_type="message:send_reply"))
        assert sorted(j.payload["message_id"] for j in jobs) == [7, 8]  # 7 twice: one job
        await wait_all_status(run.worker.store, [j.id for j in jobs], JobStatus.COMPLETED)
    assert sorted(tracker.executions.values()) == [1, 1]
    return answers, tracker


async def test_the_flask_recipe(pg_clean: str, redis_url: str) -> None:
    def post(ids: list[int]) -> list[tuple[int, Any]]:
        app = _recipe("flask_app").create_app(pg_clean, redis_url)
        try:
            with app.test_client() as http:
                return [(r.status_code, r.get_json()) for r in
                        (http.post(f"/messages/{i}/reply") for i in ids)]
        finally:
            app.extensions["gochatd"].close()

    answers, tracker = await _requests_run_jobs(pg_clean, redis_url, post)
    assert [code for code, _ in answers] == [202, 202, 202]
    assert answers[0][1] == answers[2][1]  # the same job id again (idempotency key)
    assert sorted(tracker.executions) == sorted({a[1]["job_id"] for a in answers})


async def test_the_fastapi_recipe(pg_clean: str, redis_url: str) -> None:
    from fastapi.testclient import TestClient

    def post(ids: list[int]) -> list[tuple[int, Any]]:
        app = _recipe("fastapi_app").create_app(pg_clean, redis_url)
        with TestClient(app) as http:  # runs the lifespan: the Client opens and closes
            return [(r.status_code, r.json()) for r in
                    (http.post(f"/messages/{i}/reply") for i in ids)]

    answers, tracker = await _requests_run_jobs(pg_clean, redis_url, post)
    assert [code for code, _ in answers] == [202, 202, 202]
    assert answers[0][1] == answers[2][1]
    assert sorted(tracker.executions) == sorted({a[1]["job_id"] for a in answers})


def _configure_django(pg_clean: str, redis_url: str) -> None:
    import django
    from django.conf import settings

    info = conninfo_to_dict(pg_clean)
    database = {
        "ENGINE": "django.db.backends.postgresql", "NAME": info.get("dbname"),
        "USER": info.get("user"), "HOST": info.get("host"), "PORT": info.get("port") or "5432",
    }
    if not settings.configured:
        settings.configure(
            DATABASES={"default": database}, ROOT_URLCONF="gochatd_recipe_django_views",
            ALLOWED_HOSTS=["testserver"], USE_TZ=True, INSTALLED_APPS=[],
            GOCHAT_DATABASE_URL=pg_clean, GOCHAT_REDIS_URL=redis_url,
        )
        django.setup()
    # Each test has its own database and Redis: point the settings (and the recipe) there.
    settings.DATABASES["default"].update(database)
    settings.GOCHAT_DATABASE_URL, settings.GOCHAT_REDIS_URL = pg_clean, redis_url


async def test_the_django_recipe_enqueues_after_commit(pg_clean: str, redis_url: str) -> None:
    _configure_django(pg_clean, redis_url)
    views = _recipe("django_views")

    def post(ids: list[int]) -> list[tuple[int, Any]]:
        from django.db import connections, transaction
        from django.test import Client

        try:
            answers = [(r.status_code, r.json()) for r in
                       (Client().post(f"/messages/{i}/reply") for i in ids)]
            # The same enqueue in a transaction that rolls back writes nothing.
            try:
                with transaction.atomic():
                    transaction.on_commit(lambda: views.jobs().enqueue(
                        "message:send_reply", {"message_id": 9}))
                    raise LookupError("rolled back")
            except LookupError:
                pass
            return answers
        finally:
            connections.close_all()
            views.jobs().close()
            views._client = None

    answers, _ = await _requests_run_jobs(pg_clean, redis_url, post)
    assert answers == [(202, {"queued": 7}), (202, {"queued": 8}), (202, {"queued": 7})]
