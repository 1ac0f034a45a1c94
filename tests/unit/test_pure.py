"""Pure pieces: the state machine table, backoff, redaction, stream entry parsing."""

from __future__ import annotations

import random

import pytest

from gochatd.dispatch.entries import StreamEntry
from gochatd.model import CLAIMABLE, OUTCOME_STATUS, TERMINAL, TRANSITIONS, JobStatus, can_transition
from gochatd.obs.redact import mask_url, redact_error
from gochatd.retry import Backoff, next_delay_s


def test_state_machine_table() -> None:
    assert set(TRANSITIONS) == set(JobStatus)
    # every outcome a runner can report is an edge out of running
    for status in OUTCOME_STATUS.values():
        assert can_transition(JobStatus.RUNNING, status)
    for status in CLAIMABLE:
        assert can_transition(status, JobStatus.RUNNING)
        assert can_transition(status, JobStatus.CANCELLED)
    assert TRANSITIONS[JobStatus.COMPLETED] == frozenset()
    assert not can_transition(JobStatus.COMPLETED, JobStatus.QUEUED)
    assert not can_transition(JobStatus.DEAD, JobStatus.RUNNING)
    assert can_transition(JobStatus.DEAD, JobStatus.QUEUED)
    assert not can_transition(JobStatus.QUEUED, JobStatus.COMPLETED)
    assert TERMINAL.isdisjoint(CLAIMABLE)


def test_backoff_full_jitter_is_bounded_and_capped() -> None:
    rng = random.Random(7)
    b = Backoff(base_s=1.0, cap_s=60.0)
    for attempt in range(1, 40):
        ceiling = min(60.0, 2.0 ** (attempt - 1))
        draws = [b.delay_s(attempt, rng) for _ in range(200)]
        assert all(0.0 <= d <= ceiling for d in draws)
        assert max(draws) > ceiling * 0.8  # jitter spans the range
    assert next_delay_s(b, 3, 3) is None
    assert next_delay_s(b, 2, 3) is not None


@pytest.mark.parametrize(
    ("message", "secret"),
    [
        ("connect to postgresql://app:pa55word@db/x failed", "pa55word"),
        ("redis://:topsecret@cache:6379 refused", "topsecret"),
        ("Authorization: Bearer abc.def.ghi rejected", "abc.def.ghi"),
        ("password=hunter2 host=db", "hunter2"),
        ("api_key=AKIA123456 denied", "AKIA123456"),
    ],
)
def test_redact_removes_secrets(message: str, secret: str) -> None:
    assert secret not in redact_error(message)


def test_redact_removes_payload_strings_and_caps_length() -> None:
    payload = {"to": "alice@example.com", "nested": {"body": ["very private text"]}}
    out = redact_error("failed sending very private text to alice@example.com", payload)
    assert "alice@example.com" not in out and "very private text" not in out
    assert len(redact_error("x" * 5000)) <= 512


def test_mask_url_keeps_user_and_host() -> None:
    assert mask_url("postgresql://u:p@h:5432/d") == "postgresql://u:***@h:5432/d"
    assert mask_url("sqlite:///x.db") == "sqlite:///x.db"


@pytest.mark.parametrize(
    "fields",
    [{}, {"job_id": ""}, {"job_id": "abc"}, {"job_id": "-4"}, {"job_id": "0"},
     {"job_id": "1" * 40}, {"job_id": "١٢"}, {"job_id": "12.5"}],
)
def test_malformed_stream_entries_parse_to_none(fields: dict[str, str]) -> None:
    assert StreamEntry("gochat:jobs:default", "1-0", fields).parse() is None


def test_stream_entry_parses_reference() -> None:
    ref = StreamEntry("s", "1-0", {"job_id": "42", "job_type": "sys:noop", "queue": "high",
                                   "tenant_id": "t1"}).parse()
    assert ref is not None and ref.job_id == 42 and ref.queue == "high"


def test_every_job_control_that_changes_a_status_is_an_edge_of_the_table() -> None:
    from gochatd.model import ACTION_STATUSES, JobAction

    assert set(ACTION_STATUSES) == set(JobAction)
    for status in ACTION_STATUSES[JobAction.DISCARD]:
        assert can_transition(status, JobStatus.DEAD)
    for status in ACTION_STATUSES[JobAction.RETRY]:
        assert can_transition(status, JobStatus.QUEUED)
    for status in ACTION_STATUSES[JobAction.CANCEL] - {JobStatus.RUNNING}:
        assert can_transition(status, JobStatus.CANCELLED)
    assert ACTION_STATUSES[JobAction.RUN_NOW] == CLAIMABLE  # no status change: due now
    assert JobStatus.RUNNING not in ACTION_STATUSES[JobAction.DELETE]  # cancel it first
    assert not can_transition(JobStatus.COMPLETED, JobStatus.DEAD)
