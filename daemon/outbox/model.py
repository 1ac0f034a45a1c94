"""Outbox rows and their one state machine.

Which loop moves a row out of each status:

- ``pending`` -> ``sending``: the sender claims it once ``next_attempt_at`` is due
  (database clock), taking a lease and counting an attempt.
- ``sending`` -> ``sent`` | ``pending`` | ``dead``: the sender, fenced by
  (lease_owner, attempts); or the outbox reaper once the lease expires (``pending``, or
  ``dead`` when attempts are exhausted).
- ``dead`` -> ``pending``: an operator's retry.
- ``sent`` is terminal.
"""

from __future__ import annotations

import enum
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from gochatd.model import record_to_dict


class OutboxStatus(enum.StrEnum):
    PENDING = "pending"
    SENDING = "sending"
    SENT = "sent"
    DEAD = "dead"


OUTBOX_TRANSITIONS: dict[OutboxStatus, frozenset[OutboxStatus]] = {
    OutboxStatus.PENDING: frozenset({OutboxStatus.SENDING}),
    OutboxStatus.SENDING: frozenset(
        {OutboxStatus.SENT, OutboxStatus.PENDING, OutboxStatus.DEAD}
    ),
    OutboxStatus.DEAD: frozenset({OutboxStatus.PENDING}),
    OutboxStatus.SENT: frozenset(),
}


@dataclass(frozen=True, slots=True)
class OutboxMessage:
    """A row of ``reply_outbox`` as the stores return it."""

    id: int
    tenant_id: str
    job_id: int | None
    channel: str
    recipient: str
    body: dict[str, Any]
    dedupe_key: str
    status: OutboxStatus
    attempts: int
    next_attempt_at: datetime
    created_at: datetime
    updated_at: datetime
    lease_owner: str | None = None
    lease_expires_at: datetime | None = None
    provider_message_id: str | None = None
    error_class: str | None = None
    sent_at: datetime | None = None

    def to_dict(self) -> dict[str, Any]:
        return record_to_dict(self)


@dataclass(frozen=True, slots=True)
class OutboxFilter:
    status: OutboxStatus | None = None
    tenant_id: str | None = None
    channel: str | None = None
    limit: int = 100
    after_id: int | None = None


@dataclass(frozen=True, slots=True)
class OutboxStats:
    """Rows not yet sent, by status, and the age of the oldest pending one."""

    counts: dict[OutboxStatus, int] = field(default_factory=dict)
    oldest_pending_age_s: float | None = None
