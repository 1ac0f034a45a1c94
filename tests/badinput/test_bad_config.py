"""Bad configuration: every key of ``daemon/config/settings.py`` FIELDS gets bad values through its
environment variable (and several through the YAML file), plus YAML files that are broken
as documents. ``gochatd config check`` must exit 2 with one line on stderr that names the
key (or the file), no traceback, and create nothing.

The full matrix runs ``gochatd.cli.program.main`` in this process (a few milliseconds per input);
a sample of it also runs as real processes, to hold the process-level contract as well.
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path

import pytest

from gochatd.cli.program import main
from gochatd.config.settings import FIELDS, FIELDS_BY_KEY
from tests.badinput.support import (
    ProcResult,
    one_line_error,
    run_gochatd,
    run_parallel,
    selected_params,
)
from tests.badinput.tally import tried

#: key -> bad values of its GOCHAT_* variable
ENV_BAD: dict[str, list[str]] = {
    "database_url": ["", "file:///tmp/jobs.db", "sqlite:/one-slash.db", "jobs.db"],
    "database_listen_url": ["sqlite:///x.db", "127.0.0.1:5432", "mysql://x/y"],
    "database_prepare": ["maybe", "true", "prepared"],
    "redis_url": ["http://127.0.0.1:6379", "127.0.0.1:6379", "redis:/0"],
    "redis_cluster": ["maybe", "2", "", "yes please"],
    "handlers": ["no_such_module_for_gochatd", ".relative_module", "a b", "os..path"],
    "handlers.http": [
        "not json: [", "[1]", '{"a:*": 5}', '{"a:*": {"url": "ftp://x"}}', '{"a:*": {}}',
        '{"*": {"url": "http://x"}}', '{"a:*": {"url": "http://x", "timeout_s": 0}}',
        '{"a:*": {"url": "http://x", "secret_env": "A B"}}', '{"a:*": {"url": "http://x", "m": 1}}',
    ],
    "periodic": [
        "[1]", '{"a:b": 5}', '{"a:b": {}}', '{"a:b": {"cron": "* * *"}}',
        '{"a:b": {"cron": "0 0 30 2 *"}}', '{"a:b": {"every": "0s"}}',
        '{"a:b": {"every": "1s", "catch_up": "all"}}', '{"bad type": {"every": "1s"}}',
        '{"a:b": {"every": "1s", "cron": "* * * * *"}}',
        '{"a:b": {"cron": "0 3 * * *", "tz": "Mars/Olympus"}}',
        '{"a:b": {"cron": "0 3 * * *", "tz": "../../etc/passwd"}}',
        '{"a:b": {"every": "1h", "tz": "Europe/Berlin"}}',
    ],
    "worker.id": ["worker\x01one", "w" * 201, "tab\tinside"],
    "worker.concurrency": ["abc", "1.5", "10001", "-1", "", "1e3"],
    "worker.queues": ["bad name=1", "high=abc", "high=1001", "high=0", ",,,", "high=-1", "=5",
                      "high=1.5", "d\u00e9faut=1"],
    "worker.queue_limits": ["reports", "reports=0", "reports=-1", "reports=1.5", "reports=x",
                            "reports=100001", "bad name=1", "=2", "{reports: [2]}", "{reports: ",
                            "d\u00e9faut=1"],
    "worker.queue_rates": ["provider", "provider=10", "provider=0/s", "provider=-1/s",
                           "provider=1.5/s", "provider=10/d", "provider=10/", "provider=/s",
                           "provider=1000001/s", "bad name=1/s", "=1/s", "{provider: [1]}",
                           "{provider: ", "provider=ten/s"],
    "worker.strict_priority": ["maybe", "2", "", "yes please"],
    "worker.priority_aging_s": ["0", "-10", "86401", "nan", "ten"],
    "worker.lease_s": ["0", "nan", "inf", "86401", "abc", "1,5"],
    "worker.shutdown_grace_s": ["-1", "nan", "1e9"],
    "worker.max_payload_bytes": ["1", "67108865", "1.5", "1e6"],
    "worker.max_result_bytes": ["3", "67108865", "1.5", "64k"],
    "worker.retry_base_s": ["-0.1", "inf", "1,5"],
    "worker.retry_cap_s": ["604801", "-1", "-inf"],
    "worker.poll_interval_max_s": ["0", "0.001", "61"],
    "worker.reap_interval_s": ["0.01", "3601", "NaN"],
    "retention.completed_s": ["-1", "1e12", "seven days"],
    "retention.dead_s": ["-0.5", "inf"],
    "retention.cancelled_s": ["nan", "315360001"],
    "retention.batch": ["0", "100001", "1.5"],
    "retention.interval_s": ["0.01", "86401", ""],
    "worker.db_pool_size": ["1", "201", "two"],
    "worker.redis.stream_prefix": ["", "has space", "x" * 201, "tab\there", "bell\x07"],
    "worker.redis.consumer_group": ["a b", "", "bell\x07", "\u00a0nbsp\u00a0inside\u00a0x"],
    "worker.redis.block_timeout_s": ["0", "61", "nan"],
    "worker.redis.sweep_interval_s": ["0.01", "86401", "-inf"],
    "worker.redis.stream_maxlen": ["99", "100000001", "1e5"],
    "log.level": ["verbose", "", "trace"],
    "log.format": ["xml", "", "yaml"],
    "admin.listen": ["8410", "127.0.0.1:99999", "host:port", ":8410", "[::1]",
                     "127.0.0.1:\uff18\uff14\uff11\uff10", "127.0.0.1:-1", "unix:",
                     "unix:/" + "s" * 107],
    "admin.token": ["tok\x01en", "two\nlines", "t" * 4097],
    "admin.max_body_bytes": ["1023", "67108865", "big"],
    "gateway.listen": ["nowhere", "127.0.0.1:99999", "[::1]:"],
    "gateway.keys": ["not a mapping: [", '{"md5:abc": "t"}', '{"sha256:' + "a" * 63 + '": "t"}',
                     '{"sha256:' + "a" * 64 + '": ""}', "[1, 2]"],
    "gateway.rate_per_s": ["-1", "1000001", "nan", "fast"],
    "gateway.burst": ["0", "1.5", "1000001"],
    "tenants": ["[1]", '{"t": 5}', '{"t": {"max_running": 0}}', '{"t": {"burst": 1.5}}',
                '{"t": {"rate_per_s": "inf"}}', '{"t": {"colour": 1}}', '{"": {}}'],
    "outbox.enabled": ["perhaps", "2"],
    "outbox.concurrency": ["0", "1001", "eight"],
    "outbox.lease_s": ["0.5", "3601", "nan"],
    "outbox.poll_s": ["0", "61", "-1"],
    "outbox.max_attempts": ["0", "1001", "1.5"],
    "outbox.channels": [
        "not json", "[1]", '{"wa": 5}', '{"wa": {"url": "ftp://x"}}', '{"wa": {}}',
        '{"bad name": {"url": "http://x"}}', '{"wa": {"url": "http://x", "colour": 1}}',
        '{"wa": {"url": "http://x", "timeout_s": 0}}', '{"wa": {"url": "http://x", "secret_env": "A B"}}',
        '{"wa": {"url": "http://x", "retry_base_s": "nan"}}',
        '{"wa": {"url": "https://user:pw@hooks.example/x"}}',
    ],
}

#: (name, YAML text or bytes, a piece of the message)
YAML_BAD: list[tuple[str, str | bytes, str]] = [
    ("tab-indent", "worker:\n\tconcurrency: 3\n", "not valid YAML"),
    ("duplicate-key", "worker:\n  concurrency: 3\n  concurrency: 4\n", "duplicate key 'concurrency'"),
    ("duplicate-section", "worker:\n  concurrency: 3\nlog:\n  level: info\nworker:\n  lease_s: 9\n",
     "duplicate key 'worker'"),
    ("top-level-number", "42\n", "mapping"),
    ("top-level-string", "hello world\n", "mapping"),
    ("top-level-flow-list", "[1, 2]\n", "mapping"),
    ("top-level-binary-tag", "!!binary aGVsbG8=\n", "mapping"),
    ("binary-junk", b"\x00\xff\xfe\x80garbage\x01\n", "not UTF-8"),
    ("nul-in-text", "worker:\n  concurrency: 3\x00\n", "not valid YAML"),
    ("python-tag", "worker: !!python/object/apply:os.system ['true']\n", "not valid YAML"),
    ("nested-5000-deep", "handlers: " + "[" * 5000 + "]" * 5000 + "\n", "nested too deeply"),
    ("unclosed-quote", "database_url: 'sqlite:///x.db\n", "not valid YAML"),
    ("unknown-nested-key", "worker:\n  redis:\n    colour: blue\n", "worker.redis.colour"),
    ("scalar-for-section", "worker: 5\n", "'worker'"),
    ("list-for-section", "worker:\n  - concurrency: 3\n", "'worker'"),
    ("integer-key", "1: 2\n", "'1'"),
    ("null-key", "~: 1\n", "unknown config key"),
    ("unhashable-key", "? [a, b]\n: 1\n", "not valid YAML"),
    ("concurrency-list", "worker:\n  concurrency: [1]\n", "worker.concurrency"),
    ("concurrency-fraction", "worker:\n  concurrency: 2.5\n", "worker.concurrency"),
    ("max-payload-bool", "worker:\n  max_payload_bytes: true\n", "worker.max_payload_bytes"),
    ("max-result-bool", "worker:\n  max_result_bytes: true\n", "worker.max_result_bytes"),
    ("lease-nan", "worker:\n  lease_s: .nan\n", "worker.lease_s"),
    ("lease-inf", "worker:\n  lease_s: .inf\n", "worker.lease_s"),
    ("strict-priority-2", "worker:\n  strict_priority: 2\n", "worker.strict_priority"),
    ("queues-negative", "worker:\n  queues: {high: -1}\n", "worker.queues"),
    ("queues-bad-name", "worker:\n  queues: {'bad name': 1}\n", "worker.queues"),
    ("queues-list-weight", "worker:\n  queues: {high: [1]}\n", "worker.queues"),
    ("queues-empty-mapping", "worker:\n  queues: {}\n", "worker.queues"),
    ("queues-null-weight", "worker:\n  queues: {high: null}\n", "worker.queues"),
    ("queue-limits-zero", "worker:\n  queue_limits: {reports: 0}\n", "worker.queue_limits"),
    ("queue-limits-fraction", "worker:\n  queue_limits: {reports: 2.5}\n", "worker.queue_limits"),
    ("queue-limits-bool", "worker:\n  queue_limits: {reports: true}\n", "worker.queue_limits"),
    ("queue-limits-null", "worker:\n  queue_limits: {reports: null}\n", "worker.queue_limits"),
    ("queue-limits-list", "worker:\n  queue_limits: [reports]\n", "worker.queue_limits"),
    ("queue-limits-bad-name", "worker:\n  queue_limits: {'a b': 1}\n", "worker.queue_limits"),
    ("queue-rates-number", "worker:\n  queue_rates: {provider: 10}\n", "worker.queue_rates"),
    ("queue-rates-null", "worker:\n  queue_rates: {provider: null}\n", "worker.queue_rates"),
    ("queue-rates-list", "worker:\n  queue_rates: [provider]\n", "worker.queue_rates"),
    ("queue-rates-per-day", "worker:\n  queue_rates: {provider: 10/d}\n", "worker.queue_rates"),
    ("log-level-list", "log:\n  level: [debug]\n", "log.level"),
    ("database-url-number", "database_url: 42\n", "database_url"),
    ("redis-url-list", "redis_url: [redis://x]\n", "redis_url"),
    ("handlers-mapping", "handlers: {a: 1}\n", "handlers"),
    ("worker-id-mapping", "worker:\n  id: {a: 1}\n", "worker.id"),
    ("admin-token-list", "admin:\n  token: [a, b]\n", "admin.token"),
    ("max-body-exponent", "admin:\n  max_body_bytes: 1e3\n", "admin.max_body_bytes"),
    ("stream-prefix-list", "worker:\n  redis:\n    stream_prefix: [a]\n",
     "worker.redis.stream_prefix"),
    ("outbox-channels-list", "outbox:\n  channels: [wa]\n", "outbox.channels"),
    ("outbox-channel-no-url", "outbox:\n  channels:\n    wa: {provider: webhook}\n",
     "outbox.channels"),
    ("outbox-channel-timeout-list", "outbox:\n  channels:\n    wa: {url: 'http://x', timeout_s: [1]}\n",
     "outbox.channels"),
]

#: Documents that are fine: exit 0.
YAML_OK: list[tuple[str, str | bytes]] = [
    ("empty-file", ""),
    ("comments-only", "# nothing here\n# at all\n"),
    ("document-marker-only", "---\n"),
    ("explicit-null", "~\n"),
    ("utf8-bom", "\ufeffworker:\n  concurrency: 3\n"),
]


@dataclass(frozen=True)
class ConfigCase:
    name: str
    expect: str  # a piece of the one-line message; "" when the input is fine
    env: dict[str, str] = field(default_factory=dict)
    yaml: str | bytes = ""
    args: list[str] = field(default_factory=lambda: ["config", "check"])

    @property
    def ok(self) -> bool:
        return self.expect == ""


CASES: list[ConfigCase] = (
    [ConfigCase(f"env-{key}-{i}", key, env={FIELDS_BY_KEY[key].env: value})
     for key, values in ENV_BAD.items() for i, value in enumerate(values)]
    + [ConfigCase(f"yaml-{name}", expect, yaml=text) for name, text, expect in YAML_BAD]
    + [ConfigCase(f"yaml-ok-{name}", "", yaml=text) for name, text in YAML_OK]
    + [
        ConfigCase("admin-listen-public-without-token", "admin.listen",
                   env={"GOCHAT_ADMIN_LISTEN": "0.0.0.0:8410"}),
        ConfigCase("config-file-is-a-directory", "cannot read", args=["config", "check",
                                                                      "--config", "{dir}"]),
        ConfigCase("flag-concurrency-word", "worker.concurrency",
                   args=["config", "check", "--concurrency", "many"]),
        ConfigCase("flag-queues-bad", "worker.queues", args=["config", "check", "--queues", "a b"]),
        ConfigCase("flag-admin-listen-bad", "admin.listen",
                   args=["config", "check", "--admin-listen", "localhost"]),
    ]
)

#: Also run as real processes.
AS_PROCESS = {
    "env-worker.concurrency-0", "env-database_url-1", "env-worker.queues-0",
    "env-worker.queue_limits-1", "env-worker.queue_rates-5",
    "env-admin.listen-5", "env-admin.token-0", "env-handlers-1", "yaml-binary-junk",
    "yaml-nested-5000-deep", "yaml-duplicate-section", "yaml-ok-empty-file",
    "admin-listen-public-without-token",
}


def test_every_key_has_at_least_two_bad_values() -> None:
    assert {f.key for f in FIELDS} == set(ENV_BAD), "a FIELDS key without bad values (or a stale one)"
    assert all(len(values) >= 2 for values in ENV_BAD.values())


def _prepare(case: ConfigCase, folder: Path) -> list[str]:
    folder.mkdir(parents=True, exist_ok=True)
    config = folder / "gochatd.yaml"
    config.write_bytes(case.yaml if isinstance(case.yaml, bytes) else case.yaml.encode("utf-8"))
    args = [a.replace("{dir}", str(folder)) for a in case.args]
    # Always name a file: the default /etc/gochatd/gochatd.yaml must not leak in.
    return args if "--config" in args else [*args, "--config", str(config)]


def _assert_outcome(case: ConfigCase, code: int, out: str, err: str, folder: Path) -> None:
    if case.ok:
        assert code == 0, err
        assert err == "", err
    else:
        problem = one_line_error(code, out, err, case.expect)
        assert problem is None, problem
    assert sorted(p.name for p in folder.iterdir()) == ["gochatd.yaml"], "files appeared"


@pytest.mark.parametrize("case", CASES, ids=[c.name for c in CASES])
def test_config_check_in_process(
    case: ConfigCase, tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    tried("config")
    args = _prepare(case, tmp_path)
    for name in list(os.environ):
        if name.startswith("GOCHAT_"):
            monkeypatch.delenv(name)
    monkeypatch.setenv("GOCHAT_ADMIN_LISTEN", "127.0.0.1:0")
    for name, value in case.env.items():
        monkeypatch.setenv(name, value)
    monkeypatch.chdir(tmp_path)
    code = main(args)
    out, err = capsys.readouterr()
    _assert_outcome(case, code, out, err, tmp_path)


PROCESS_CASES = [c for c in CASES if c.name in AS_PROCESS]
#: ``serve`` must refuse these before it starts anything.
SERVE_ALSO = {"env-admin.token-0", "env-handlers-1", "yaml-binary-junk", "yaml-duplicate-section"}
SERVE_CASES = [ConfigCase(f"serve-{c.name}", c.expect, env=c.env, yaml=c.yaml,
                          args=["serve", *c.args[2:]])
               for c in PROCESS_CASES if c.name in SERVE_ALSO] + [
    # The channel's secret lives in an environment variable that is not set.
    ConfigCase("serve-outbox-secret-env-unset", "OUTBOX_NO_SUCH_SECRET", args=["serve"], env={
        "GOCHAT_OUTBOX_CHANNELS":
            '{"wa": {"url": "http://127.0.0.1:9/hook", "secret_env": "OUTBOX_NO_SUCH_SECRET"}}'}),
    ConfigCase("serve-outbox-unknown-provider", "unknown provider 'carrier_pigeon'", args=["serve"],
               env={"GOCHAT_OUTBOX_CHANNELS": '{"wa": {"provider": "carrier_pigeon"}}'}),
]


@pytest.fixture(scope="module")
def process_results(
    request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[dict[str, tuple[ProcResult, Path]]]:
    cases = selected_params(request, "case", ConfigCase, test="test_config_as_a_process")
    base = tmp_path_factory.mktemp("config")

    def run_one(case: ConfigCase) -> tuple[ProcResult, Path]:
        folder = base / case.name
        args = _prepare(case, folder)
        return run_gochatd(args, case.env, cwd=folder, timeout_s=20), folder

    yield dict(zip([c.name for c in cases], run_parallel(run_one, cases), strict=True))


@pytest.mark.parametrize("case", PROCESS_CASES + SERVE_CASES,
                         ids=[c.name for c in PROCESS_CASES + SERVE_CASES])
def test_config_as_a_process(
    case: ConfigCase, process_results: dict[str, tuple[ProcResult, Path]]
) -> None:
    tried("config")
    result, folder = process_results[case.name]
    _assert_outcome(case, result.returncode, result.stdout, result.stderr, folder)
