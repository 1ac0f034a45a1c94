from __future__ import annotations

from pathlib import Path

import pytest

from gochatd.config.settings import DEFAULT_QUEUE_WEIGHTS, FIELDS, FIELDS_BY_KEY, load_settings
from gochatd.errors import ConfigError


def test_defaults_need_no_configuration(tmp_path: Path) -> None:
    s = load_settings(env={}, config_file=None)
    assert s.database_url == "sqlite:///gochatd.db"
    assert s.redis_url == ""
    assert s.worker_concurrency == 10
    assert s.worker_lease_s == 30.0
    assert s.worker_shutdown_grace_s == 30.0
    assert s.worker_redis_stream_prefix == "gochat:jobs"
    assert s.worker_redis_consumer_group == "gochat-workers"
    assert s.worker_redis_sweep_interval_s == 30.0
    assert s.worker_queues == DEFAULT_QUEUE_WEIGHTS
    assert s.worker_priority_aging_s == 10.0


def test_precedence_flags_over_env_over_file(tmp_path: Path) -> None:
    cfg = tmp_path / "g.yaml"
    cfg.write_text(
        "worker:\n  concurrency: 3\n  lease_s: 12\n  redis:\n    block_timeout_s: 4\n"
        "database_url: sqlite:///from-file.db\n"
    )
    env = {"GOCHAT_WORKER_CONCURRENCY": "5", "GOCHAT_WORKER_REDIS_BLOCK_TIMEOUT_S": "0.5"}
    s = load_settings(config_file=str(cfg), env=env, flags={"worker.concurrency": "7"})
    assert s.worker_concurrency == 7
    assert s.sources["worker.concurrency"] == "flag"
    assert s.worker_redis_block_timeout_s == 0.5
    assert s.sources["worker.redis.block_timeout_s"] == "env"
    assert s.worker_lease_s == 12.0
    assert s.sources["worker.lease_s"] == "file"
    assert s.database_url == "sqlite:///from-file.db"


def test_env_names_follow_yaml_paths() -> None:
    names = {f.env for f in FIELDS}
    for expected in (
        "GOCHAT_DATABASE_URL", "GOCHAT_REDIS_URL", "GOCHAT_WORKER_CONCURRENCY",
        "GOCHAT_WORKER_QUEUES", "GOCHAT_WORKER_LEASE_S", "GOCHAT_WORKER_SHUTDOWN_GRACE_S",
        "GOCHAT_WORKER_REDIS_STREAM_PREFIX", "GOCHAT_WORKER_REDIS_CONSUMER_GROUP",
        "GOCHAT_WORKER_REDIS_BLOCK_TIMEOUT_S", "GOCHAT_WORKER_REDIS_SWEEP_INTERVAL_S",
        "GOCHAT_HANDLERS",
    ):
        assert expected in names


@pytest.mark.parametrize(
    ("env", "fragment"),
    [
        (
            {"GOCHAT_WORKER_CONCURRENCY": "0"},
            "worker.concurrency (GOCHAT_WORKER_CONCURRENCY): 0 is outside 1..10000",
        ),
        ({"GOCHAT_WORKER_CONCURRENCY": "ten"}, "worker.concurrency"),
        ({"GOCHAT_WORKER_CONCURRENCY": "2.5"}, "expected an integer"),
        ({"GOCHAT_WORKER_LEASE_S": "nan"}, "finite"),
        ({"GOCHAT_WORKER_LEASE_S": "-1"}, "outside 1..86400"),
        ({"GOCHAT_DATABASE_URL": "mysql://x"}, "scheme must be one of"),
        ({"GOCHAT_REDIS_URL": "http://x"}, "redis_url"),
        ({"GOCHAT_WORKER_QUEUES": "high=x"}, "worker.queues"),
        ({"GOCHAT_WORKER_QUEUES": "bad queue=1"}, "invalid queue name"),
        ({"GOCHAT_WORKER_QUEUES": "a=0,b=0"}, "weight above 0"),
        ({"GOCHAT_WORKER_STRICT_PRIORITY": "maybe"}, "true or false"),
        ({"GOCHAT_LOG_LEVEL": "loud"}, "log.level"),
    ],
)
def test_bad_values_name_the_key_and_range(env: dict[str, str], fragment: str) -> None:
    with pytest.raises(ConfigError) as info:
        load_settings(env=env)
    assert fragment in str(info.value)
    assert "\n" not in str(info.value)


def test_unknown_and_malformed_files_are_refused(tmp_path: Path) -> None:
    unknown = tmp_path / "u.yaml"
    unknown.write_text("worker:\n  concurency: 3\n")
    with pytest.raises(ConfigError, match=r"unknown config key 'worker\.concurency'"):
        load_settings(config_file=str(unknown), env={})
    broken = tmp_path / "b.yaml"
    broken.write_text("worker: [1,\n")
    with pytest.raises(ConfigError, match="not valid YAML"):
        load_settings(config_file=str(broken), env={})
    scalar = tmp_path / "s.yaml"
    scalar.write_text("just a string\n")
    with pytest.raises(ConfigError, match="must hold a mapping"):
        load_settings(config_file=str(scalar), env={})
    with pytest.raises(ConfigError, match="cannot read config file"):
        load_settings(config_file=str(tmp_path / "missing.yaml"), env={})


def test_queue_weights_parse_forms() -> None:
    s = load_settings(env={"GOCHAT_WORKER_QUEUES": "high=9, low=1"})
    assert s.worker_queues == {"high": 9, "low": 1}
    s = load_settings(env={"GOCHAT_WORKER_QUEUES": "high,purgable,custom"})
    assert s.worker_queues == {"high": 8, "purgable": 1, "custom": 1}


def test_queue_limits_from_yaml_and_env(tmp_path: Path) -> None:
    assert load_settings(env={}).worker_queue_limits == {}
    cfg = tmp_path / "g.yaml"
    cfg.write_text("worker:\n  queue_limits: {reports: 2, exports: 1}\n")
    from_file = load_settings(config_file=str(cfg), env={})
    assert from_file.worker_queue_limits == {"reports": 2, "exports": 1}
    assert from_file.sources["worker.queue_limits"] == "file"
    # The variable wins over the file, as a list or as a YAML/JSON mapping.
    s = load_settings(config_file=str(cfg), env={"GOCHAT_WORKER_QUEUE_LIMITS": "reports=3"})
    assert s.worker_queue_limits == {"reports": 3}
    s = load_settings(env={"GOCHAT_WORKER_QUEUE_LIMITS": '{"reports": 4, "exports": "5"}'})
    assert s.worker_queue_limits == {"reports": 4, "exports": 5}
    assert load_settings(env={"GOCHAT_WORKER_QUEUE_LIMITS": ""}).worker_queue_limits == {}
    # A SIGHUP applies it: reloadable.
    assert load_settings(env={}).diff(from_file) == (["worker.queue_limits"], [])
    with pytest.raises(ConfigError, match=r"worker\.queue_limits .*'reports'.*1\.\.100000"):
        load_settings(env={"GOCHAT_WORKER_QUEUE_LIMITS": "reports=0"})


def test_masked_hides_credentials() -> None:
    s = load_settings(env={
        "GOCHAT_DATABASE_URL": "postgresql://app:s3cret@db.internal:5432/gochat",
        "GOCHAT_REDIS_URL": "redis://:hunter22@cache:6379/0",
    })
    shown = repr(s.masked())
    assert "s3cret" not in shown and "hunter22" not in shown
    assert "postgresql://app:***@db.internal:5432/gochat" in shown


def test_diff_separates_reloadable_from_restart() -> None:
    a = load_settings(env={})
    b = load_settings(env={"GOCHAT_WORKER_CONCURRENCY": "3", "GOCHAT_WORKER_LEASE_S": "9",
                           "GOCHAT_WORKER_QUEUES": "high=1",
                           "GOCHAT_WORKER_PRIORITY_AGING_S": "2.5"})
    assert b.worker_priority_aging_s == 2.5
    reload, restart = a.diff(b)
    assert set(reload) == {"worker.concurrency", "worker.queues", "worker.priority_aging_s"}
    assert restart == ["worker.lease_s"]


def test_every_default_is_written_once_in_fields() -> None:
    """Settings and Client take their defaults from FIELDS: one attribute per key, in the
    table's order, each with the table's default, and no list or mapping shared."""
    import dataclasses
    import inspect

    from gochatd.client.client import Client
    from gochatd.config.settings import DEFAULTS, Settings

    names = [f.name for f in dataclasses.fields(Settings)]
    assert names == [spec.attr for spec in FIELDS] + ["sources", "config_file"]
    first, second = Settings(), Settings()
    for spec in FIELDS:
        assert getattr(first, spec.attr) == spec.default == DEFAULTS[spec.attr], spec.key
        if isinstance(spec.default, dict | list):
            assert getattr(first, spec.attr) is not spec.default, spec.key
            assert getattr(first, spec.attr) is not getattr(second, spec.attr), spec.key
    assert load_settings(env={}, config_file=None) == first
    params = inspect.signature(Client).parameters
    assert params["max_payload_bytes"].default == FIELDS_BY_KEY["worker.max_payload_bytes"].default
    assert params["stream_prefix"].default == FIELDS_BY_KEY["worker.redis.stream_prefix"].default
    assert params["consumer_group"].default == FIELDS_BY_KEY["worker.redis.consumer_group"].default
