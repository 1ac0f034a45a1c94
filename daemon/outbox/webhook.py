"""The built-in ``webhook`` provider: one signed JSON POST per outbox row.

Request: ``POST <url>`` with ``{id, tenant_id, channel, recipient, body, dedupe_key,
job_id}``, ``Idempotency-Key: <dedupe_key>`` (the same on every attempt, so the receiver can
drop repeats) and, when the channel names a secret, ``X-Gochatd-Signature``
(gochatd.signing).

Answer: 2xx sent (the provider message id is taken from an ``X-Message-Id`` header or an
``id``/``message_id`` field of a JSON answer); 408, 429 (after its ``Retry-After``), 5xx,
timeouts and connection errors retry with this channel's backoff; any other status is dead.
"""

from __future__ import annotations

import json
import os

import httpx
import trio

import gochatd
from gochatd.errors import ConfigError
from gochatd.obs import otel
from gochatd.outbox.model import OutboxMessage
from gochatd.outbox.providers import (
    ChannelConfig,
    Delivery,
    DeliveryOutcome,
    full_jitter_s,
    register_provider,
)
from gochatd.retry import parse_retry_after
from gochatd.signing import SIGNATURE_HEADER, sign

RETRYABLE_STATUSES = frozenset({408, 429})
#: Longest Retry-After honoured; a larger one is capped rather than parking the row for days.
#: Only this much of an answer is read (to find a message id).
MAX_ANSWER_BYTES = 64 * 1024
MAX_MESSAGE_ID_CHARS = 200


def read_secret(channel: ChannelConfig) -> bytes | None:
    if not channel.secret_env:
        return None
    value = os.environ.get(channel.secret_env)
    if not value:
        raise ConfigError(
            f"outbox.channels.{channel.name}.secret_env: the environment variable "
            f"{channel.secret_env} is not set"
        )
    return value.encode("utf-8")


def _message_id(response: httpx.Response, raw: bytes) -> str | None:
    found: object = response.headers.get("X-Message-Id")
    if not found and "json" in response.headers.get("Content-Type", ""):
        try:
            doc = json.loads(raw)
        except (ValueError, RecursionError):
            doc = None
        if isinstance(doc, dict):
            found = doc.get("message_id", doc.get("id"))
    if isinstance(found, str | int) and not isinstance(found, bool):
        text = str(found)
        if text.isprintable():
            return text[:MAX_MESSAGE_ID_CHARS]
    return None


def request_body(message: OutboxMessage) -> bytes:
    return json.dumps({
        "id": message.id, "tenant_id": message.tenant_id, "channel": message.channel,
        "recipient": message.recipient, "body": message.body, "dedupe_key": message.dedupe_key,
        "job_id": message.job_id,
    }, separators=(",", ":"), ensure_ascii=False).encode("utf-8")


class WebhookProvider:
    def __init__(self, channel: ChannelConfig) -> None:
        if not channel.url.startswith(("http://", "https://")):
            raise ConfigError(f"outbox.channels.{channel.name}.url: an http(s) URL is required")
        self._channel = channel
        self._secret = read_secret(channel)
        self._client = httpx.AsyncClient(
            timeout=channel.timeout_s, follow_redirects=False,
            headers={"User-Agent": f"gochatd/{gochatd.__version__}"},
        )

    def backoff_s(self, attempt: int) -> float:
        return full_jitter_s(attempt, self._channel.retry_base_s, self._channel.retry_cap_s)

    async def deliver(self, message: OutboxMessage) -> Delivery:
        raw = request_body(message)
        headers = {"Content-Type": "application/json", "Idempotency-Key": message.dedupe_key}
        if self._secret is not None:
            headers[SIGNATURE_HEADER] = sign(self._secret, raw)
        spans = otel.SPANS
        if spans is not None:  # the delivery span's traceparent (obs/otel.py)
            spans.inject(headers)
        # httpx's timeout is per phase; this bounds the whole exchange.
        with trio.move_on_after(self._channel.timeout_s) as scope:
            try:
                async with self._client.stream(
                    "POST", self._channel.url, content=raw, headers=headers
                ) as response:
                    answer = b""
                    async for chunk in response.aiter_bytes():
                        answer += chunk
                        if len(answer) >= MAX_ANSWER_BYTES:
                            break
            except httpx.TimeoutException:
                return Delivery(DeliveryOutcome.RETRY, "timeout")
            except httpx.HTTPError as exc:
                return Delivery(DeliveryOutcome.RETRY, type(exc).__name__)
        if scope.cancelled_caught:
            return Delivery(DeliveryOutcome.RETRY, "timeout")
        return self._classify(response, answer)

    def _classify(self, response: httpx.Response, answer: bytes) -> Delivery:
        status = response.status_code
        if 200 <= status < 300:
            return Delivery(DeliveryOutcome.SENT, provider_message_id=_message_id(response, answer))
        error_class = f"http_{status}"
        if status in RETRYABLE_STATUSES or status >= 500:
            retry_after = (
                parse_retry_after(response.headers.get("Retry-After")) if status in {429, 503}
                else None
            )
            return Delivery(DeliveryOutcome.RETRY, error_class, retry_after_s=retry_after)
        return Delivery(DeliveryOutcome.DEAD, error_class)

    async def aclose(self) -> None:
        await self._client.aclose()


register_provider("webhook", WebhookProvider)
