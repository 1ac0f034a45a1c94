"""Pure parts of periodic jobs (``every``, declarations, the slot plan) and of HTTP handlers
(config validation, route matching), plus their config keys."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest

from gochatd.config.settings import load_settings
from gochatd.errors import ConfigError
from gochatd.periodic_jobs.specs import (
    GRACE_S,
    EverySchedule,
    PeriodicSpec,
    make_spec,
    parse_every,
    plan_slot,
    slot_text,
)
from gochatd.worker.http_handlers import HttpHandlers, HttpRoute, match_route


def t(text: str) -> datetime:
    return datetime.fromisoformat(text).replace(tzinfo=UTC)


# -- every -----------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("raw", "seconds"),
    [(300, 300), ("300", 300), ("300s", 300), ("5m", 300), ("1h", 3600), ("1d", 86400),
     ("1.5m", 90), (" 2 s ", 2), ("366d", 366 * 86400)],
)
def test_every_durations(raw: object, seconds: int) -> None:
    assert parse_every(raw).period_s == seconds


@pytest.mark.parametrize("raw", ["0s", "0.5s", "1.5s", "367d", "5 minutes", "-1", "", True,
                                 [1], {"s": 1}, "1w"])
def test_every_refuses_bad_durations(raw: object) -> None:
    with pytest.raises(ValueError, match="every"):
        parse_every(raw)


def test_every_slots_are_aligned_to_the_epoch() -> None:
    every = EverySchedule(300)
    assert every.prev_at_or_before(t("2026-12-01 14:07:12")) == t("2026-12-01 14:05:00")
    assert every.prev_at_or_before(t("2026-12-01 14:05:00")) == t("2026-12-01 14:05:00")
    assert every.next_after(t("2026-12-01 14:05:00")) == t("2026-12-01 14:10:00")
    assert every.next_after(t("2026-12-01 14:09:59.999")) == t("2026-12-01 14:10:00")
    # an odd period still lands every daemon on the same slots
    seven = EverySchedule(7)
    assert int(seven.prev_at_or_before(t("2026-12-01 14:07:12")).timestamp()) % 7 == 0  # type: ignore[union-attr]


# -- declarations ----------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("entry", "message"),
    [
        ({}, "exactly one of cron or every"),
        ({"cron": "* * * * *", "every": "1s"}, "exactly one of cron or every"),
        ({"cron": "61 * * * *"}, "cron: minute"),
        ({"every": "soon"}, "every"),
        ({"every": "1s", "queue": "no spaces"}, "queue"),
        ({"every": "1s", "payload": [1]}, "payload"),
        ({"every": "1s", "tenant_id": ""}, "tenant_id"),
        ({"every": "1s", "catch_up": "all"}, "catch_up: expected skip or latest"),
        ({"every": "1s", "max_attempts": 0}, "max_attempts"),
        ({"every": "1s", "max_attempts": True}, "max_attempts"),
        ({"every": "1s", "cronn": "x"}, "unknown key 'cronn'"),
    ],
)
def test_bad_declarations_name_the_field(entry: dict[str, object], message: str) -> None:
    with pytest.raises(ValueError, match=message):
        make_spec("sla:trigger_accounts", entry, "config")


def test_bad_job_type() -> None:
    with pytest.raises(ValueError, match="not a job type"):
        make_spec("no spaces please", {"every": "1s"}, "config")


def test_idempotency_key_is_job_type_and_slot() -> None:
    spec = make_spec("sla:trigger_accounts", {"cron": "*/5 * * * *"}, "config")
    assert spec.idempotency_key(t("2026-12-01 14:05")) == "sla:trigger_accounts:2026-12-01T14:05:00Z"
    assert spec.catch_up == "skip"  # the default


# -- the slot plan ---------------------------------------------------------------------------


def spec(catch_up: str = "skip", every_s: int = 300) -> PeriodicSpec:
    return PeriodicSpec("sla:trigger_accounts", EverySchedule(every_s), catch_up=catch_up)


def test_an_on_time_slot_is_enqueued() -> None:
    plan = plan_slot(spec(), t("2026-12-01 14:00"), t("2026-12-01 14:05:00.3"))
    assert plan is not None
    assert (plan.slot, plan.enqueue, plan.missed) == (t("2026-12-01 14:05"), True, False)


def test_a_recorded_slot_is_not_planned_again() -> None:
    assert plan_slot(spec(), t("2026-12-01 14:05"), t("2026-12-01 14:09:59")) is None
    assert plan_slot(spec(), t("2026-12-01 14:10"), t("2026-12-01 14:09:59")) is None  # ahead


def test_late_within_the_grace_is_still_on_time() -> None:
    now = t("2026-12-01 14:05") + timedelta(seconds=GRACE_S)
    plan = plan_slot(spec(), t("2026-12-01 14:00"), now)
    assert plan is not None and plan.enqueue and not plan.missed


@pytest.mark.parametrize(("catch_up", "enqueue"), [("skip", False), ("latest", True)])
def test_a_missed_slot_follows_catch_up(catch_up: str, enqueue: bool) -> None:
    # The fleet last handled 13:00; it is now 14:07, so 13:05 .. 14:05 were missed.
    plan = plan_slot(spec(catch_up), t("2026-12-01 13:00"), t("2026-12-01 14:07"))
    assert plan is not None
    assert plan.slot == t("2026-12-01 14:05")  # only the latest, never the backlog
    assert plan.missed
    assert plan.enqueue is enqueue


@pytest.mark.parametrize("catch_up", ["skip", "latest"])
def test_a_new_periodic_job_starts_with_an_on_time_slot(catch_up: str) -> None:
    on_time = plan_slot(spec(catch_up), None, t("2026-12-01 14:05:01"))
    assert on_time is not None and on_time.enqueue
    late = plan_slot(spec(catch_up), None, t("2026-12-01 14:07"))
    assert late is not None and late.slot == t("2026-12-01 14:05") and not late.enqueue


def test_slot_text_is_utc() -> None:
    from datetime import timezone

    moment = datetime(2026, 12, 1, 16, 5, tzinfo=timezone(timedelta(hours=2)))
    assert slot_text(moment) == "2026-12-01T14:05:00Z"


# -- config keys -----------------------------------------------------------------------------


def test_config_file_sections(tmp_path: Path) -> None:
    cfg = tmp_path / "g.yaml"
    cfg.write_text(
        "handlers:\n"
        "  modules: [tests.support.e2e_jobs]\n"
        "  http:\n"
        '    "automation:*": {url: "http://user:pw@api.internal/jobs", timeout_s: 30,'
        " secret_env: GOCHAT_HOOK_SECRET}\n"
        "    automation:special: {url: https://other.internal/x}\n"
        "periodic:\n"
        '  "sla:trigger_accounts": {cron: "*/5 * * * *", queue: scheduled_jobs}\n'
        '  "scheduled:trigger_items": {every: 1h, catch_up: latest}\n'
    )
    s = load_settings(config_file=str(cfg), env={})
    assert s.handlers == ["tests.support.e2e_jobs"]
    assert s.handlers_http["automation:*"] == {
        "url": "http://user:pw@api.internal/jobs", "timeout_s": 30.0,
        "secret_env": "GOCHAT_HOOK_SECRET",
    }
    assert s.handlers_http["automation:special"]["timeout_s"] == 30.0  # the default
    assert s.periodic["scheduled:trigger_items"] == {"every": "1h", "catch_up": "latest"}
    masked = s.masked()["handlers.http"]
    assert "pw" not in masked["automation:*"]["url"]


def test_handlers_list_form_still_works(tmp_path: Path) -> None:
    cfg = tmp_path / "g.yaml"
    cfg.write_text("handlers: [a.b, c]\n")
    assert load_settings(config_file=str(cfg), env={}).handlers == ["a.b", "c"]


def test_env_holds_yaml() -> None:
    env = {"GOCHAT_HANDLERS_HTTP": '{"billing:*": {"url": "http://127.0.0.1:9/x"}}',
           "GOCHAT_PERIODIC": '{"sys:noop": {"every": "10s"}}'}
    s = load_settings(env=env)
    assert s.handlers_http["billing:*"]["url"] == "http://127.0.0.1:9/x"
    assert s.periodic == {"sys:noop": {"every": "10s"}}
    assert s.sources["handlers.http"] == "env"


@pytest.mark.parametrize(
    ("env", "message"),
    [
        ({"GOCHAT_HANDLERS_HTTP": '{"a:*": {"url": "ftp://x"}}'}, "handlers.http .*url"),
        ({"GOCHAT_HANDLERS_HTTP": '{"a:*": {"url": "http://x", "timeout_s": 0}}'}, "timeout_s"),
        ({"GOCHAT_HANDLERS_HTTP": '{"a:*": {"url": "http://x", "timeout_s": "1"}}'}, "timeout_s"),
        ({"GOCHAT_HANDLERS_HTTP": '{"a:*": {"url": "http://x", "secret_env": "NO-DASH"}}'},
         "secret_env"),
        ({"GOCHAT_HANDLERS_HTTP": '{"a:*": {"url": "http://x", "method": "GET"}}'},
         "unknown key 'method'"),
        ({"GOCHAT_HANDLERS_HTTP": '{"*": {"url": "http://x"}}'}, "not a job type"),
        ({"GOCHAT_HANDLERS_HTTP": '{"a*:b": {"url": "http://x"}}'}, "not a job type"),
        ({"GOCHAT_HANDLERS_HTTP": '["http://x"]'}, "expected a mapping"),
        ({"GOCHAT_HANDLERS_HTTP": "{unclosed"}, "YAML or JSON"),
        ({"GOCHAT_PERIODIC": '{"x": {"cron": "* * *"}}'}, "periodic .*5 fields"),
        ({"GOCHAT_PERIODIC": '{"x": "every 5s"}'}, "periodic .*expected a mapping"),
    ],
)
def test_bad_values_are_config_errors(env: dict[str, str], message: str) -> None:
    with pytest.raises(ConfigError, match=message):
        load_settings(env=env)


# -- HTTP routes -----------------------------------------------------------------------------


def routes(*patterns: str) -> dict[str, HttpRoute]:
    return {p: HttpRoute(p, f"http://127.0.0.1:9/{p}", 1.0, None) for p in patterns}


def test_exact_beats_prefix_and_longest_prefix_wins() -> None:
    table = routes("automation:*", "automation:rules:*", "automation:rules:run")
    assert match_route(table, "automation:rules:run") is table["automation:rules:run"]
    assert match_route(table, "automation:rules:other") is table["automation:rules:*"]
    assert match_route(table, "automation:send") is table["automation:*"]
    assert match_route(table, "automation") is None  # the prefix is "automation:"
    assert match_route(table, "automationx:send") is None
    assert match_route(table, "billing:charge") is None


def test_a_missing_secret_is_a_config_error() -> None:
    config = {"a:*": {"url": "http://x", "timeout_s": 1.0, "secret_env": "HOOK_SECRET"}}
    with pytest.raises(ConfigError, match="HOOK_SECRET is not set"):
        HttpHandlers(config, environ={})
    handlers = HttpHandlers(config, environ={"HOOK_SECRET": "s3cret"})
    assert handlers.routes["a:*"].secret == b"s3cret"
    assert "s3cret" not in repr(handlers.routes["a:*"])
