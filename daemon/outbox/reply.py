"""Validating what a handler passes to ``ctx.reply``: the checks run in the handler, so a
bad reply fails the job that made it (dead at once: ``InvalidReply`` is ``NonRetryable``)
instead of surfacing later in the sender."""

from __future__ import annotations

import json
from typing import Any

from gochatd.errors import InvalidReply
from gochatd.model import Reply

MAX_CHANNEL_CHARS = 200
MAX_RECIPIENT_CHARS = 1000
MAX_DEDUPE_KEY_CHARS = 400
#: The JSON text of one reply body.
MAX_BODY_BYTES = 256 * 1024
#: Replies one job execution may buffer.
MAX_REPLIES_PER_JOB = 100


def _text(name: str, value: Any, limit: int, *, allow_empty: bool = False) -> str:
    if not isinstance(value, str):
        raise InvalidReply(f"reply {name} must be a string, not {type(value).__name__}")
    if not value and not allow_empty:
        raise InvalidReply(f"reply {name} must not be empty")
    if len(value) > limit:
        raise InvalidReply(f"reply {name} is longer than {limit} characters")
    if "\x00" in value:
        raise InvalidReply(f"reply {name} must not contain NUL characters")
    return value


def make_reply(*, channel: Any, to: Any, body: Any, dedupe_key: Any) -> Reply:
    """A validated ``Reply``, or ``InvalidReply`` saying which argument is wrong."""
    channel = _text("channel", channel, MAX_CHANNEL_CHARS)
    recipient = _text("recipient (to)", to, MAX_RECIPIENT_CHARS, allow_empty=True)
    dedupe_key = _text("dedupe_key", dedupe_key, MAX_DEDUPE_KEY_CHARS)
    if not dedupe_key.isascii() or not dedupe_key.isprintable():
        # It travels as the Idempotency-Key header.
        raise InvalidReply("reply dedupe_key must be printable ASCII")
    if not isinstance(body, dict):
        raise InvalidReply(f"reply body must be a JSON object (dict), not {type(body).__name__}")
    try:
        text = json.dumps(body, allow_nan=False, ensure_ascii=False)
    except (TypeError, ValueError, RecursionError) as exc:
        raise InvalidReply(f"reply body is not JSON-serialisable: {type(exc).__name__}") from None
    if "\\u0000" in text:
        raise InvalidReply("reply body must not contain NUL characters")
    try:
        size = len(text.encode("utf-8"))
    except UnicodeEncodeError:
        raise InvalidReply("reply body holds text that is not valid Unicode") from None
    if size > MAX_BODY_BYTES:
        raise InvalidReply(f"reply body is {size} bytes of JSON; the limit is {MAX_BODY_BYTES}")
    # A private copy: the handler may keep mutating its dict after the call.
    return Reply(channel=channel, recipient=recipient, body=json.loads(text),
                 dedupe_key=dedupe_key)
