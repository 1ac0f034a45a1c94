"""Bad input on the command line: ``gochatd`` processes, one per input.

Every input must end in exit 2 with exactly one line on stderr naming what is wrong, no
traceback, nothing on stdout — and must write nothing: each case gets its own database
(SQLite file, or its own PostgreSQL schema) holding one canary job, which must be the only
row, unchanged, afterwards. A few inputs are legal but hostile (filters that look like SQL):
they must succeed and match nothing.

(tests/e2e/test_cli.py covers the first handful of bad inputs; these are the rest.) No
process can receive a NUL byte in argv; the last test shows both halves of that.

The processes run in parallel, started by one fixture for the whole module. Inputs that
argparse itself refuses run mostly through ``gochatd.cli.program.main`` in this process instead
(the same code without 0.3 s of interpreter start each; see IN_PROCESS).
"""

from __future__ import annotations

import json
import os
import shutil
import uuid
from collections.abc import Iterator
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

import psycopg
import pytest
import trio

from gochatd.cli.program import UsageError, build_parser, main
from gochatd.client.client import Client, validate_enqueue
from gochatd.errors import InvalidJob
from gochatd.store.queries import load_migrations
from tests.badinput.support import (
    ProcResult,
    one_line_error,
    run_gochatd,
    run_parallel,
    selected_params,
)
from tests.badinput.tally import tried
from tests.support.e2e_jobs import query, upgrade


@dataclass(frozen=True)
class CliCase:
    name: str
    args: list[str | bytes]  # "{dir}" is replaced by the case's own directory
    expect: str  # a piece of the one-line error
    files: dict[str, bytes] = field(default_factory=dict)  # written in the case's directory
    env: dict[str, str] = field(default_factory=dict)
    succeeds_with: Any = None  # legal but hostile: exit 0 and this JSON on stdout
    backend: str = "sqlite"

    @property
    def id(self) -> str:
        return self.name if self.backend == "sqlite" else f"{self.name}-pg"


def enqueue(*extra: str | bytes, expect: str, name: str, **kw: Any) -> CliCase:
    return CliCase(name, ["enqueue", *extra], expect, **kw)


#: The case's own database as a migration source, and a destination beside it.
SRC, DST = "sqlite:///{dir}/db/jobs.db", "sqlite:///{dir}/moved.db"
#: A SQLite file in a directory that does not exist (must stay that way).
NOWHERE = "sqlite:///{dir}/nowhere/x.db"


def migrate(command: str, *extra: str, expect: str, name: str) -> CliCase:
    return CliCase(name, ["migrate", command, "--from", SRC, *extra], expect)


def nest(depth: int) -> str:
    return "[" * depth + "]" * depth


BIG_PAYLOAD = json.dumps({"blob": "x" * 1_100_000}).encode()

CASES: list[CliCase] = [
    # --payload
    enqueue("sys:noop", "--payload", nest(20_000), expect="--payload", name="payload-20k-deep-array"),
    enqueue("sys:noop", "--payload", '{"a":' * 5000 + "1" + "}" * 5000, expect="--payload",
            name="payload-5k-deep-object"),
    enqueue("sys:noop", "--payload", "@deep.json", expect="--payload",
            files={"deep.json": nest(200_000).encode()}, name="payload-file-200k-deep"),
    enqueue("sys:noop", "--payload", '{"x": NaN}', expect="payload", name="payload-nan"),
    enqueue("sys:noop", "--payload", '{"x": Infinity}', expect="payload", name="payload-infinity"),
    enqueue("sys:noop", "--payload", '{"x": [-Infinity]}', expect="payload",
            name="payload-minus-infinity"),
    enqueue("sys:noop", "--payload", "NaN", expect="JSON object", name="payload-bare-nan"),
    enqueue("sys:noop", "--payload", '{"n": ' + "7" * 5000 + "}", expect="--payload",
            name="payload-5000-digit-number"),
    enqueue("sys:noop", "--payload", "@big.json", expect="over the limit",
            files={"big.json": BIG_PAYLOAD}, name="payload-over-default-limit"),
    enqueue("sys:noop", "--payload", "@bad.json", expect="--payload",
            files={"bad.json": b"\xff\xfe{}"}, name="payload-file-invalid-utf8"),
    enqueue("sys:noop", "--payload", "@{dir}", expect="cannot read", name="payload-file-is-a-directory"),
    enqueue("sys:noop", "--payload", "@nul.json", expect="not valid JSON",
            files={"nul.json": b'{"a": "\x00"}'}, name="payload-file-raw-nul"),
    enqueue("sys:noop", "--payload", "@empty.json", expect="not valid JSON",
            files={"empty.json": b""}, name="payload-file-empty"),
    enqueue("sys:noop", "--payload", b'{"a": "\xff"}', expect="payload",
            name="payload-invalid-utf8-argv"),
    enqueue("sys:noop", "--payload", '{"a": "\\ud800"}', expect="payload",
            name="payload-escaped-lone-surrogate"),
    enqueue("sys:noop", "--payload", '{"a": "\\u0000"}', expect="NUL", name="payload-nul-escape"),
    enqueue("sys:noop", "--payload", '{"\\u0000": 1}', expect="NUL", name="payload-nul-in-key"),
    enqueue("sys:noop", "--payload", "{} {}", expect="not valid JSON", name="payload-two-objects"),
    enqueue("sys:noop", "--payload", "\ufeff{}", expect="--payload", name="payload-bom"),
    enqueue("sys:noop", "--payload", '"hello"', expect="JSON object", name="payload-string"),
    enqueue("sys:noop", "--payload", "", expect="not valid JSON", name="payload-empty"),
    enqueue("sys:noop", "--payload", expect="expected one argument", name="payload-missing-value"),
    # job type
    enqueue("j\u00f6b:send", expect="job_type", name="type-non-ascii-letter"),
    enqueue("\uff4a\uff4f\uff42", expect="job_type", name="type-fullwidth"),
    enqueue("sys:noop\u200b", expect="job_type", name="type-zero-width-space"),
    enqueue("\u202esys:noop", expect="job_type", name="type-rtl-override"),
    enqueue("sys:noop\n", expect="job_type", name="type-trailing-newline"),
    enqueue("sys:\tnoop", expect="job_type", name="type-tab"),
    enqueue("a" * 201, expect="job_type", name="type-201-chars"),
    enqueue("", expect="job_type", name="type-empty"),
    enqueue(":", expect="job_type", name="type-only-colon"),
    enqueue(b"sys:\xff", expect="job_type", name="type-invalid-utf8"),
    enqueue("sys:noop'; DROP TABLE background_jobs; --", expect="job_type", name="type-sql"),
    # when
    enqueue("sys:noop", "--at", "2026-01-01T00:00:00", expect="--at", name="at-without-zone"),
    enqueue("sys:noop", "--at", "2026-01-01", expect="--at", name="at-date-only"),
    enqueue("sys:noop", "--at", "tomorrow", expect="--at", name="at-nonsense"),
    enqueue("sys:noop", "--at", "", expect="--at", name="at-empty"),
    enqueue("sys:noop", "--at", "2026-13-01T00:00:00Z", expect="--at", name="at-month-13"),
    enqueue("sys:noop", "--at", "2026-01-01T00:00:00+25:00", expect="--at", name="at-zone-25h"),
    enqueue("sys:noop", "--at", "9999-12-31T23:59:59-14:00", expect="scheduled_at",
            name="at-year-10000-in-utc"),
    enqueue("sys:noop", "--at", "0001-01-01T00:00:00+01:00", expect="scheduled_at",
            name="at-year-0-in-utc"),
    enqueue("sys:noop", "--at", "2026-01-01T00:00:00Z", "--delay", "1", expect="--delay",
            name="at-and-delay"),
    enqueue("sys:noop", "--delay", "nan", expect="--delay", name="delay-nan"),
    enqueue("sys:noop", "--delay", "inf", expect="--delay", name="delay-inf"),
    enqueue("sys:noop", "--delay", "-inf", expect="--delay", name="delay-minus-inf"),
    enqueue("sys:noop", "--delay", "1e400", expect="--delay", name="delay-overflows-to-inf"),
    enqueue("sys:noop", "--delay", "0x10", expect="--delay", name="delay-hex"),
    enqueue("sys:noop", "--delay", "", expect="--delay", name="delay-empty"),
    enqueue("sys:noop", "--delay", "400000000", expect="delay_s", name="delay-13-years"),
    # numbers
    enqueue("sys:noop", "--priority", "9" * 20, expect="priority", name="priority-huge"),
    enqueue("sys:noop", "--priority", "1001", expect="priority", name="priority-1001"),
    enqueue("sys:noop", "--priority", "-1001", expect="priority", name="priority-minus-1001"),
    enqueue("sys:noop", "--priority", "1.5", expect="--priority", name="priority-fraction"),
    enqueue("sys:noop", "--max-attempts", "1001", expect="max_attempts", name="max-attempts-1001"),
    enqueue("sys:noop", "--max-attempts", "-5", expect="max_attempts", name="max-attempts-negative"),
    enqueue("sys:noop", "--max-attempts", "1e3", expect="--max-attempts", name="max-attempts-exponent"),
    # other enqueue fields
    enqueue("sys:noop", "--queue", "a b", expect="queue", name="queue-with-space"),
    enqueue("sys:noop", "--queue", "q" * 65, expect="queue", name="queue-65-chars"),
    enqueue("sys:noop", "--queue", "default\n", expect="queue", name="queue-trailing-newline"),
    enqueue("sys:noop", "--tenant", "", expect="tenant_id", name="tenant-empty"),
    enqueue("sys:noop", "--tenant", "t" * 201, expect="tenant_id", name="tenant-201-chars"),
    enqueue("sys:noop", "--tenant", b"\xff\xfe", expect="tenant_id", name="tenant-invalid-utf8"),
    enqueue("sys:noop", "--idempotency-key", "", expect="idempotency_key", name="idempotency-key-empty"),
    enqueue("sys:noop", "--idempotency-key", "k" * 513, expect="idempotency_key",
            name="idempotency-key-513-chars"),
    enqueue("sys:noop", "--idempotency-key", b"\xc3", expect="idempotency_key",
            name="idempotency-key-invalid-utf8"),
    enqueue("sys:noop", "--traceparent", "zz", expect="traceparent", name="traceparent-junk"),
    enqueue("sys:noop", "--unique-for", "-1", expect="--unique-for", name="unique-for-negative"),
    enqueue("sys:noop", "--unique-for", "nan", expect="--unique-for", name="unique-for-nan"),
    enqueue("sys:noop", "--unique-for", "1e12", expect="unique_for_s", name="unique-for-huge"),
    enqueue("sys:noop", "--unique-key", "k" * 513, expect="unique_key",
            name="unique-key-513-chars"),
    enqueue("sys:noop", "--unique-key", "", expect="unique_key", name="unique-key-empty"),
    enqueue("sys:noop", "--unique-key", b"\xc3", expect="unique_key",
            name="unique-key-invalid-utf8"),
    enqueue("sys:noop", "--traceparent", "00-" + "A" * 32 + "-" + "b" * 16 + "-01",
            expect="traceparent", name="traceparent-upper-case"),
    # dependencies (docs/workflows.md); the canary is job 1, of tenant "default"
    enqueue("sys:noop", "--depends-on", "abc", expect="--depends-on", name="depends-on-word"),
    enqueue("sys:noop", "--depends-on", "", expect="--depends-on", name="depends-on-empty"),
    enqueue("sys:noop", "--depends-on", "0", expect="--depends-on", name="depends-on-zero"),
    enqueue("sys:noop", "--depends-on", "1,,2", expect="--depends-on",
            name="depends-on-empty-item"),
    enqueue("sys:noop", "--depends-on", "1;2", expect="--depends-on", name="depends-on-semicolon"),
    enqueue("sys:noop", "--depends-on", "9223372036854775808", expect="--depends-on",
            name="depends-on-beyond-bigint"),
    enqueue("sys:noop", "--depends-on", ",".join(map(str, range(1, 1002))), expect="at most 1000",
            name="depends-on-1001-ids"),
    enqueue("sys:noop", "--run-if-failed", expect="--run-if-failed: only with --depends-on",
            name="run-if-failed-alone"),
    enqueue("sys:noop", "--run-if-failed=yes", expect="--run-if-failed",
            name="run-if-failed-with-value"),
    enqueue("sys:noop", "--depends-on", "1", "--delay", "5", expect="delay_s",
            name="depends-on-with-delay"),
    enqueue("sys:noop", "--depends-on", "1", "--at", "2030-01-01T00:00:00Z",
            expect="scheduled_at", name="depends-on-with-at"),
    enqueue("sys:noop", "--depends-on", "1", "--unique-for", "60", expect="unique",
            name="depends-on-unique"),
    enqueue("sys:noop", "--depends-on", "424242", expect="--depends-on: job 424242 not found",
            name="depends-on-missing"),
    enqueue("sys:noop", "--depends-on", "1", "--tenant", "other",
            expect="--depends-on: job 1 not found", name="depends-on-other-tenants-job"),
    enqueue("sys:noop", "--t", "x", expect="ambiguous", name="flag-ambiguous-abbreviation"),
    enqueue("sys:noop", "--payloads", "{}", expect="--payloads", name="flag-typo"),
    enqueue("sys:noop", "--database-url", "sqlite:///", expect="database_url", name="database-url-no-path"),
    enqueue("sys:noop", "--redis-url", "http://127.0.0.1:6379", expect="redis_url",
            name="redis-url-http"),
    # jobs
    CliCase("limit-zero", ["jobs", "list", "--limit", "0"], "--limit"),
    CliCase("limit-10001", ["jobs", "list", "--limit", "10001"], "--limit"),
    CliCase("limit-negative", ["jobs", "list", "--limit", "-1"], "--limit"),
    CliCase("limit-word", ["jobs", "list", "--limit", "ten"], "--limit"),
    CliCase("limit-fraction", ["jobs", "list", "--limit", "1.0"], "--limit"),
    CliCase("after-id-word", ["jobs", "list", "--after-id", "abc"], "--after-id"),
    CliCase("after-id-beyond-bigint", ["jobs", "list", "--after-id", "9" * 20], "--after-id"),
    CliCase("status-upper-case", ["jobs", "list", "--status", "QUEUED"], "--status"),
    CliCase("show-zero", ["jobs", "show", "0"], "job id"),
    CliCase("show-negative", ["jobs", "show", "-1"], "job id"),
    CliCase("show-fraction", ["jobs", "show", "1.0"], "job id"),
    CliCase("show-hex", ["jobs", "show", "0x1"], "job id"),
    CliCase("show-empty", ["jobs", "show", ""], "job id"),
    CliCase("show-beyond-bigint", ["jobs", "show", "9223372036854775808"], "job id"),
    CliCase("show-arabic-indic-digit", ["jobs", "show", "\u0663"], "not found"),
    CliCase("show-two-ids", ["jobs", "show", "1", "2"], "unrecognized"),
    CliCase("cancel-word", ["jobs", "cancel", "abc"], "job id"),
    CliCase("retry-exponent", ["jobs", "retry", "1e3"], "job id"),
    CliCase("retry-queued-canary", ["jobs", "retry", "1"], "cannot retry"),
    # commands
    CliCase("unknown-command", ["frobnicate"], "invalid choice"),
    CliCase("unknown-jobs-command", ["jobs", "frob"], "invalid choice"),
    CliCase("unknown-db-command", ["db", "downgrade"], "invalid choice"),
    CliCase("unknown-config-command", ["config", "show"], "invalid choice"),
    CliCase("enqueue-without-type", ["enqueue"], "required"),
    CliCase("show-without-id", ["jobs", "show"], "required"),
    CliCase("jobs-alone", ["jobs"], "required"),
    CliCase("db-alone", ["db"], "required"),
    CliCase("config-alone", ["config"], "required"),
    CliCase("bench-zero-jobs", ["bench", "--jobs", "0"], "--jobs"),
    CliCase("bench-unknown-backend", ["bench", "--backend", "mysql"], "--backend"),
    CliCase("periodic-alone", ["periodic"], "required"),
    CliCase("periodic-unknown-command", ["periodic", "run"], "invalid choice"),
    CliCase("periodic-list-zero-count", ["periodic", "list", "--count", "0"], "--count"),
    CliCase("periodic-list-bad-cron", ["periodic", "list"], "periodic (GOCHAT_PERIODIC): a:b: cron",
            env={"GOCHAT_PERIODIC": '{"a:b": {"cron": "61 * * * *"}}'}),
    CliCase("periodic-list-bad-tz", ["periodic", "list"],
            "periodic (GOCHAT_PERIODIC): a:b: tz: unknown time zone 'Europe/Atlantis'",
            env={"GOCHAT_PERIODIC": '{"a:b": {"cron": "0 3 * * *", "tz": "Europe/Atlantis"}}'}),
    CliCase("periodic-list-bad-module", ["periodic", "list", "--handlers", "no_such_mod_c"],
            "cannot import module"),
    CliCase("outbox-alone", ["outbox"], "required"),
    CliCase("outbox-show-word", ["outbox", "show", "first"], "outbox message id"),
    CliCase("outbox-retry-zero", ["outbox", "retry", "0"], "outbox message id"),
    CliCase("outbox-retry-missing", ["outbox", "retry", "424242"], "outbox message 424242 not found"),
    CliCase("outbox-list-bad-status", ["outbox", "list", "--status", "queued"], "--status"),
    CliCase("outbox-list-limit-zero", ["outbox", "list", "--limit", "0"], "--limit"),
    CliCase("outbox-list-channel-injection",
            ["outbox", "list", "--json", "--channel", "x'; DROP TABLE reply_outbox; --"], "",
            succeeds_with=[]),
    # migrate: refused before anything moves (the case's database is the source)
    migrate("start", "--to", SRC, "--all", expect="same database", name="migrate-same-database"),
    migrate("cutover", "--to", DST, "--all", "--window", "-1", expect="--window",
            name="migrate-window-negative"),
    migrate("start", "--to", DST, "--all", "--ack-timeout", "soon", expect="--ack-timeout",
            name="migrate-ack-timeout-word"),
    migrate("run", "--to", DST, "--tenants", ",", expect="empty tenant",
            name="migrate-run-empty-tenant"),
    migrate("cutover", "--to", DST, expect="required", name="migrate-cutover-without-scope"),
    migrate("rollback", "--to", DST, "--tenants", "nosuch", expect="unknown tenant",
            name="migrate-rollback-unknown-tenant"),
    migrate("cutover", "--to", DST, "--tenants", "default", expect="no move started",
            name="migrate-cutover-not-started"),
    migrate("rollback", "--to", DST, "--tenants", "default", expect="nothing to roll back",
            name="migrate-rollback-not-cut-over"),
    migrate("run", "--to", "mysql://db/x", "--all", expect="--to", name="migrate-to-mysql"),
    # filters a listing refuses like enqueue refuses the field (no job can have the value)
    CliCase("list-type-sql-injection", ["jobs", "list", "--json", "--type", "' OR '1'='1"],
            "job_type"),
    CliCase("list-type-wildcards", ["jobs", "list", "--json", "--type", "%"], "job_type"),
    CliCase("list-tenant-invalid-utf8", ["jobs", "list", "--tenant", b"t\xff"], "tenant_id"),
    CliCase("list-tenant-empty", ["jobs", "list", "--tenant", ""], "tenant_id"),
    CliCase("list-type-invalid-utf8", ["jobs", "list", "--type", b"t\xff"], "job_type"),
    CliCase("list-queue-invalid-utf8", ["jobs", "list", "--queue", b"q\xff"], "queue"),
    CliCase("list-queue-with-space", ["jobs", "list", "--queue", "bad queue"], "queue"),
    CliCase("list-queue-65-chars", ["jobs", "list", "--queue", "q" * 65], "queue"),
    CliCase("list-search-201-chars", ["jobs", "list", "--search", "s" * 201], "search"),
    CliCase("list-search-empty", ["jobs", "list", "--search", ""], "search"),
    CliCase("list-search-invalid-utf8", ["jobs", "list", "--search", b"s\xff"], "search"),
    CliCase("list-order-sideways", ["jobs", "list", "--order", "sideways"], "--order"),
    CliCase("list-search-wildcards", ["jobs", "list", "--json", "--search", "%_"], "",
            succeeds_with=[]),
    CliCase("outbox-list-channel-invalid-utf8", ["outbox", "list", "--channel", b"c\xff"],
            "--channel"),
    CliCase("outbox-list-tenant-invalid-utf8", ["outbox", "list", "--tenant", b"\xfe\xff"],
            "--tenant"),
    CliCase("outbox-list-channel-empty", ["outbox", "list", "--channel", ""], "--channel"),
    CliCase("outbox-list-tenant-201-chars", ["outbox", "list", "--tenant", "t" * 201], "--tenant"),
    # no database at the URL: refused, and nothing is created (not even the directory)
    *(CliCase(f"missing-database-{'-'.join(a for a in args if a.isalpha())}",
              [*args, "--database-url", NOWHERE], "no gochatd database at /")
      for args in (["enqueue", "sys:noop"], ["jobs", "list"], ["jobs", "show", "1"],
                   ["jobs", "retry", "1"], ["jobs", "cancel", "1"], ["jobs", "prune"],
                   ["jobs", "delete", "1"], ["jobs", "bulk", "delete", "--status", "dead"],
                   ["outbox", "list"], ["outbox", "show", "1"], ["outbox", "retry", "1"])),
    CliCase("missing-database-prune-dry-run", ["jobs", "prune", "--dry-run", "--database-url",
                                               NOWHERE], "run 'gochatd db upgrade'"),
    CliCase("missing-database-relative-url", ["jobs", "list", "--database-url",
                                              "sqlite:///gochatd.db"], "gochatd.db; run"),
    CliCase("missing-database-flag-first", ["--database-url", NOWHERE, "enqueue", "sys:noop"],
            "no gochatd database at /"),
    CliCase("missing-database-env", ["jobs", "list"], "no gochatd database at /",
            env={"GOCHAT_DATABASE_URL": "sqlite:///no/such/dir/x.db"}),
    CliCase("missing-schema-pg", ["jobs", "list", "--database-url", "{pg_noschema}"],
            "no gochatd schema in postgresql://"),
    CliCase("missing-schema-pg-enqueue", ["enqueue", "sys:noop", "--database-url",
                                          "{pg_noschema}"], "gochatd db upgrade"),
    CliCase("missing-schema-pg-outbox", ["outbox", "list", "--database-url", "{pg_noschema}"],
            "no gochatd schema"),
    CliCase("missing-schema-pg-prune", ["jobs", "prune", "--database-url", "{pg_noschema}"],
            "no gochatd schema"),
    CliCase("migrate-status-missing-source", ["migrate", "status", "--from", NOWHERE],
            "no such file: /"),
    CliCase("migrate-plan-missing-source", ["migrate", "plan", "--from", NOWHERE, "--to", DST],
            "no such file: /"),
    CliCase("migrate-status-no-schema-pg", ["migrate", "status", "--from", "{pg_noschema}"],
            "has no gochatd schema"),
    # argparse's own messages, reworded
    enqueue("sys:noop", "--delay", "abc", name="delay-word-reads-naturally",
            expect="argument --delay: expected a non-negative number of seconds, got 'abc'"),
    enqueue("sys:noop", "--priority", "high", name="priority-word-reads-naturally",
            expect="argument --priority: expected an integer, got 'high'"),
    CliCase("show-word-reads-naturally", ["jobs", "show", "x"],
            "argument id: expected a job id, got 'x'"),
    enqueue("sys:noop", "--payload", "null", expect="--payload: must be a JSON object, got null",
            name="payload-null"),
    enqueue("sys:noop", "--payload", "true", expect="must be a JSON object, got a boolean",
            name="payload-true"),
    enqueue("sys:noop", "--payload", "7", expect="must be a JSON object, got a number",
            name="payload-number"),
    # jobs show/retry/cancel/prune
    CliCase("show-missing", ["jobs", "show", "424242"], "job 424242 not found"),
    CliCase("batches-alone", ["batches"], "required"),
    CliCase("batches-show-without-id", ["batches", "show"], "required"),
    CliCase("batches-show-word", ["batches", "show", "first"], "batch id"),
    CliCase("batches-show-zero", ["batches", "show", "0"], "batch id"),
    CliCase("batches-show-beyond-bigint", ["batches", "show", "9223372036854775808"], "batch id"),
    CliCase("batches-show-missing", ["batches", "show", "424242"], "batch 424242 not found"),
    CliCase("batches-unknown-command", ["batches", "list"], "invalid choice"),
    CliCase("cancel-missing", ["jobs", "cancel", "424242"], "not found"),
    CliCase("retry-missing", ["jobs", "retry", "424242"], "not found"),
    CliCase("cancel-beyond-bigint", ["jobs", "cancel", "9" * 20], "job id"),
    CliCase("retry-zero", ["jobs", "retry", "0"], "job id"),
    # jobs delete/run-now/discard/bulk (the canary is queued and due: nothing here may touch it)
    CliCase("delete-word", ["jobs", "delete", "abc"], "job id"),
    CliCase("delete-missing", ["jobs", "delete", "424242"], "job 424242 not found"),
    CliCase("delete-two-ids", ["jobs", "delete", "1", "2"], "unrecognized"),
    CliCase("run-now-zero", ["jobs", "run-now", "0"], "job id"),
    CliCase("run-now-missing", ["jobs", "run-now", "424242"], "not found"),
    CliCase("run-now-underscore", ["jobs", "run_now", "1"], "invalid choice"),
    CliCase("discard-beyond-bigint", ["jobs", "discard", "9" * 20], "job id"),
    CliCase("discard-missing", ["jobs", "discard", "424242"], "not found"),
    CliCase("bulk-without-selection", ["jobs", "bulk", "delete"], "needs ids or at least one"),
    CliCase("bulk-without-action", ["jobs", "bulk", "--queue", "default"], "required"),
    CliCase("bulk-unknown-action", ["jobs", "bulk", "explode", "--queue", "q"], "invalid choice"),
    CliCase("bulk-ids-word", ["jobs", "bulk", "delete", "--ids", "1,x"], "--ids"),
    CliCase("bulk-ids-empty", ["jobs", "bulk", "delete", "--ids", ""], "--ids"),
    CliCase("bulk-ids-trailing-comma", ["jobs", "bulk", "delete", "--ids", "1,"], "--ids"),
    CliCase("bulk-ids-zero", ["jobs", "bulk", "discard", "--ids", "0"], "--ids"),
    CliCase("bulk-ids-beyond-bigint", ["jobs", "bulk", "discard", "--ids", "9" * 20], "--ids"),
    CliCase("bulk-too-many-ids", ["jobs", "bulk", "discard", "--ids",
                                  ",".join(str(i) for i in range(2, 10_003))], "ids: expected 1"),
    CliCase("bulk-status-upper-case", ["jobs", "bulk", "delete", "--status", "DEAD"], "--status"),
    CliCase("bulk-queue-with-space", ["jobs", "bulk", "retry", "--queue", "bad queue"], "queue"),
    CliCase("bulk-tenant-invalid-utf8", ["jobs", "bulk", "cancel", "--tenant", b"\xfe"],
            "tenant_id"),
    CliCase("bulk-type-sql", ["jobs", "bulk", "delete", "--type", "x'; DROP TABLE j; --"],
            "job_type"),
    CliCase("prune-extra-argument", ["jobs", "prune", "7"], "unrecognized"),
    CliCase("prune-unknown-flag", ["jobs", "prune", "--older-than", "1d"], "unrecognized"),
    CliCase("prune-bad-retention", ["jobs", "prune", "--dry-run"], "retention.completed_s",
            env={"GOCHAT_RETENTION_COMPLETED_S": "a week"}),
    # periodic list
    CliCase("periodic-list-count-word", ["periodic", "list", "--count", "three"],
            "argument --count: expected an integer in 1..10000, got 'three'"),
    CliCase("periodic-list-count-10001", ["periodic", "list", "--count", "10001"], "--count"),
    CliCase("periodic-list-extra", ["periodic", "list", "now"], "unrecognized"),
    # outbox
    CliCase("outbox-unknown-command", ["outbox", "purge"], "invalid choice"),
    CliCase("outbox-show-missing", ["outbox", "show", "424242"], "outbox message 424242 not found"),
    CliCase("outbox-show-beyond-bigint", ["outbox", "show", "9" * 20], "outbox message id"),
    CliCase("outbox-list-after-id-negative", ["outbox", "list", "--after-id", "-1"], "--after-id"),
    CliCase("outbox-list-limit-word", ["outbox", "list", "--limit", "all"],
            "expected an integer in 1..10000, got 'all'"),
    CliCase("outbox-retry-without-id", ["outbox", "retry"], "required"),
    # migrate
    CliCase("migrate-alone", ["migrate"], "required"),
    CliCase("migrate-unknown-command", ["migrate", "undo"], "invalid choice"),
    CliCase("migrate-status-without-from", ["migrate", "status"], "--from"),
    CliCase("migrate-status-mysql", ["migrate", "status", "--from", "mysql://x/y"], "--from"),
    migrate("copy", "--to", DST, "--all", "--batch-size", "0", expect="--batch-size",
            name="migrate-copy-batch-size-zero"),
    migrate("run", "--to", DST, "--all", "--tenants", "a", expect="not allowed with",
            name="migrate-run-all-and-tenants"),
    migrate("validate", "--to", DST, "--all", expect="nothing was copied",
            name="migrate-validate-before-copy"),
    migrate("catch-up", "--to", DST, "--all", expect="move copy` first",
            name="migrate-catch-up-before-start"),
    migrate("copy", "--to", DST, "--all", expect="--upgrade-destination",
            name="migrate-copy-destination-without-schema"),
    # db upgrade
    CliCase("db-upgrade-extra", ["db", "upgrade", "now"], "unrecognized"),
    CliCase("db-upgrade-mysql", ["db", "upgrade", "--database-url", "mysql://x/y"], "database_url"),
    CliCase("db-upgrade-no-path", ["db", "upgrade", "--database-url", "sqlite:///"], "file path"),
    # config check
    CliCase("config-check-queue-weight-word", ["config", "check", "--queues", "high=abc"],
            "worker.queues: weight of 'high' must be an integer in 0..1000, got 'abc'"),
    CliCase("config-check-queue-weight-env", ["config", "check"],
            "worker.queues (GOCHAT_WORKER_QUEUES): weight of 'low' must be",
            env={"GOCHAT_WORKER_QUEUES": "high=2,low=1001"}),
    CliCase("config-check-concurrency-word", ["config", "check", "--concurrency", "many"],
            "worker.concurrency"),
    CliCase("config-check-admin-listen", ["config", "check", "--admin-listen", "nowhere"],
            "admin.listen"),
    CliCase("config-check-handlers", ["config", "check", "--handlers", "no_such_mod_c"],
            "cannot import module"),
    CliCase("config-check-config-missing", ["config", "check", "--config", "{dir}/none.yaml"],
            "none.yaml"),
    # gateway hash-key (stdin is empty)
    CliCase("gateway-alone", ["gateway"], "required"),
    CliCase("gateway-hash-key-empty-stdin", ["gateway", "hash-key"], "no key on stdin"),
    CliCase("gateway-hash-key-bad-tenant", ["gateway", "hash-key", "--generate", "--tenant", ""],
            "--tenant"),
    CliCase("gateway-hash-key-database-url", ["--database-url", NOWHERE, "gateway", "hash-key"],
            "--database-url does not apply to 'gochatd gateway'"),
    # the common flags before the subcommand
    CliCase("config-first-missing", ["--config", "{dir}/none.yaml", "jobs", "list"], "none.yaml"),
    CliCase("redis-url-first-http", ["--redis-url", "http://x", "enqueue", "sys:noop"],
            "redis_url"),
    CliCase("database-url-first-no-value", ["--database-url"], "expected one argument"),
    # legal, hostile: must match nothing
    CliCase("list-tenant-drop-table",
            ["jobs", "list", "--json", "--tenant", "x'; DROP TABLE background_jobs; --"], "",
            succeeds_with=[]),
    CliCase("list-tenant-unicode", ["jobs", "list", "--json", "--tenant", "\U0001f4a9\u202e"], "",
            succeeds_with=[]),
]

#: The inputs whose handling involves the database: run again on PostgreSQL.
ON_POSTGRES = {
    "payload-nan", "payload-infinity", "payload-5000-digit-number", "payload-invalid-utf8-argv",
    "payload-escaped-lone-surrogate", "payload-nul-escape", "type-trailing-newline",
    "tenant-invalid-utf8", "at-year-10000-in-utc", "at-year-0-in-utc", "queue-trailing-newline",
    "after-id-beyond-bigint", "show-beyond-bigint", "retry-queued-canary",
    "list-type-sql-injection", "list-tenant-drop-table", "list-tenant-unicode",
    "outbox-retry-missing", "outbox-list-channel-injection", "list-tenant-invalid-utf8",
    "list-queue-with-space", "show-missing", "cancel-missing", "outbox-show-missing",
    "depends-on-missing", "depends-on-other-tenants-job", "depends-on-with-delay",
    "batches-show-missing",
}
ALL_CASES = CASES + [replace(c, backend="postgres") for c in CASES if c.name in ON_POSTGRES]


def _refused_by_the_parser(case: CliCase) -> bool:
    """The input never gets past argument parsing: no settings, no database."""
    argv = [a if isinstance(a, str) else os.fsdecode(a) for a in case.args]
    if not argv or argv[0].startswith("-"):
        return False
    try:
        build_parser().parse_args(argv)
    except UsageError:
        return True
    return False


#: Refused by argparse already: run through ``gochatd.cli.program.main`` in this process (the same
#: code, without 0.3 s of interpreter start each); every fourth of them as a process too.
_PARSER_LEVEL = [c.id for c in ALL_CASES if _refused_by_the_parser(c)]
IN_PROCESS = set(_PARSER_LEVEL) - set(_PARSER_LEVEL[::4])


@dataclass(frozen=True)
class Outcome:
    result: ProcResult
    rows_before: list[tuple[Any, ...]]
    rows_after: list[tuple[Any, ...]]
    files_after: list[str]


def _rows(url: str) -> list[tuple[Any, ...]]:
    """Every row, as text (a bad row may hold values Python cannot decode)."""
    if url.startswith("sqlite:"):
        return query(url, "SELECT * FROM background_jobs ORDER BY id")
    return query(url, "SELECT row_to_json(b)::text FROM background_jobs AS b ORDER BY id")


async def _seed(url: str) -> None:
    """Migrate and enqueue the canary (queued; no daemon ever runs it)."""
    await upgrade(url)
    async with Client(url) as client:
        await client.enqueue("sys:noop", {"canary": True}, idempotency_key="canary")


@pytest.fixture(scope="module")
def cli_outcomes(
    request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory, pg_migrated: str
) -> Iterator[dict[str, Outcome]]:
    cases = [c for c in selected_params(request, "case", CliCase, test="test_bad_command_line")
             if c.id not in IN_PROCESS]
    base = tmp_path_factory.mktemp("cli")
    template = base / "template.db"
    trio.run(_seed, f"sqlite:///{template}")
    run_tag = uuid.uuid4().hex[:8]
    schemas: list[str] = []
    # The migrated test database seen through a schema that does not exist: no tables.
    pg_noschema = f"{pg_migrated}?options=-csearch_path%3Dbadinput_{run_tag}_none"

    def prepare(case: CliCase) -> str:
        (base / case.id / "db").mkdir(parents=True)
        for name, content in case.files.items():
            (base / case.id / name).write_bytes(content)
        if case.backend == "sqlite":
            path = base / case.id / "db" / "jobs.db"
            shutil.copy(template, path)
            return f"sqlite:///{path}"
        schema = f"badinput_{run_tag}_{case.id.replace('-', '_')}"
        schemas.append(schema)
        url = f"{pg_migrated}?options=-csearch_path%3D{schema}"
        with psycopg.connect(url, autocommit=True) as conn:
            conn.execute(f'CREATE SCHEMA "{schema}"')
            conn.execute("CREATE TABLE gochatd_schema_migrations (version integer PRIMARY KEY,"
                         " name text NOT NULL, applied_at timestamptz NOT NULL DEFAULT now())")
            for migration in load_migrations("postgres"):
                conn.execute(migration.up_sql.encode())
                conn.execute("INSERT INTO gochatd_schema_migrations (version, name) "
                             "VALUES (%s, %s)", (migration.version, migration.name))
            conn.execute("INSERT INTO background_jobs (job_type, payload, idempotency_key) "
                         """VALUES ('sys:noop', '{"canary": true}', 'canary')""")
        return url

    urls = dict(zip([c.id for c in cases], run_parallel(prepare, cases), strict=True))

    def run_one(case: CliCase) -> Outcome:
        url = urls[case.id]
        before = _rows(url)
        folder = base / case.id
        args = [a.replace("{dir}", str(folder)).replace("{pg_noschema}", pg_noschema)
                if isinstance(a, str) else a for a in case.args]
        result = run_gochatd(args, {"GOCHAT_DATABASE_URL": url, **case.env}, cwd=folder)
        files = sorted(p.name for p in folder.iterdir() if p.name != "db")
        return Outcome(result, before, _rows(url), files)

    outcomes = dict(zip([c.id for c in cases], run_parallel(run_one, cases), strict=True))
    yield outcomes
    with psycopg.connect(pg_migrated, autocommit=True) as conn:
        for schema in schemas:
            conn.execute(f'DROP SCHEMA IF EXISTS "{schema}" CASCADE')


@pytest.fixture
def outcome(
    case: CliCase, request: pytest.FixtureRequest, tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str],
) -> Outcome:
    if case.id not in IN_PROCESS:
        outcomes: dict[str, Outcome] = request.getfixturevalue("cli_outcomes")
        return outcomes[case.id]
    for name in list(os.environ):
        if name.startswith("GOCHAT_"):
            monkeypatch.delenv(name)
    database = tmp_path / "db" / "jobs.db"
    monkeypatch.setenv("GOCHAT_DATABASE_URL", f"sqlite:///{database}")
    monkeypatch.chdir(tmp_path)
    code = main([a if isinstance(a, str) else os.fsdecode(a) for a in case.args])
    out, err = capsys.readouterr()
    rows = [("canary",)]  # no database was opened, so none can have changed…
    assert not database.parent.exists(), "a database was created"  # …nor appeared
    return Outcome(ProcResult(code, out, err), rows, rows, sorted(p.name for p in tmp_path.iterdir()))


@pytest.mark.parametrize("case", ALL_CASES, ids=[c.id for c in ALL_CASES])
def test_bad_command_line(case: CliCase, outcome: Outcome) -> None:
    tried("cli")
    result = outcome.result
    if case.succeeds_with is not None:
        assert result.returncode == 0, result
        assert json.loads(result.stdout) == case.succeeds_with, result.stdout
        assert result.stderr == "", result.stderr
    else:
        problem = one_line_error(result.returncode, result.stdout, result.stderr, case.expect)
        assert problem is None, problem
    assert len(outcome.rows_before) == 1
    assert outcome.rows_after == outcome.rows_before, "the database changed"
    assert outcome.files_after == sorted(case.files), "files appeared in the working directory"


def test_nul_in_the_job_type(tmp_path: Path) -> None:
    """argv cannot carry a NUL (the kernel's strings end there), and the validation the
    command runs refuses one from any other producer."""
    tried("cli")
    with pytest.raises(ValueError, match="null byte"):
        run_gochatd(["enqueue", "sys:noop\x00"], cwd=tmp_path)
    with pytest.raises(InvalidJob, match="job_type"):
        validate_enqueue("sys:noop\x00", {}, queue=None, tenant_id="default",
                         idempotency_key=None, scheduled_at=None, delay_s=None,
                         max_attempts=None, priority=0, traceparent=None, max_payload_bytes=1024)
