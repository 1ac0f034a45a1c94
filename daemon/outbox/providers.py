"""The provider protocol, what one delivery attempt returns, and the registry.

A provider delivers one outbox row to an outside service and says how it went; it never
touches the database. The sender turns the answer into a fenced state change. To add a
provider::

    from gochatd.outbox.providers import register_provider

    class SmsProvider:
        def __init__(self, channel: ChannelConfig) -> None: ...
        async def deliver(self, message: OutboxMessage) -> Delivery: ...
        def backoff_s(self, attempt: int) -> float: ...
        async def aclose(self) -> None: ...

    register_provider("sms", SmsProvider)

and map a channel to it: ``outbox.channels.sms_eu: {provider: sms, url: ...}``.
"""

from __future__ import annotations

import enum
import random
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, Protocol

from gochatd.errors import ConfigError
from gochatd.outbox.model import OutboxMessage


class DeliveryOutcome(enum.Enum):
    SENT = "sent"
    RETRY = "retry"  # transient: try again after the provider's backoff (or retry_after_s)
    DEAD = "dead"  # the provider refused it for good


@dataclass(frozen=True, slots=True)
class Delivery:
    outcome: DeliveryOutcome
    #: A class name, never a response body or anything that may hold a secret.
    error_class: str | None = None
    provider_message_id: str | None = None
    #: The provider asked for this wait (Retry-After); it overrides the backoff.
    retry_after_s: float | None = None


@dataclass(frozen=True, slots=True)
class ChannelConfig:
    """One ``outbox.channels.<name>`` entry. The secret is read from ``secret_env`` when
    the sender starts, never from the config file."""

    name: str
    provider: str = "webhook"
    url: str = ""
    secret_env: str = ""
    timeout_s: float = 10.0
    retry_base_s: float = 1.0
    retry_cap_s: float = 300.0
    #: Anything else a non-built-in provider needs (``options:`` in the entry).
    options: dict[str, Any] = field(default_factory=dict)


class Provider(Protocol):
    async def deliver(self, message: OutboxMessage) -> Delivery: ...

    def backoff_s(self, attempt: int) -> float:
        """The wait before attempt ``attempt + 1`` after a retryable failure."""
        ...

    async def aclose(self) -> None: ...


ProviderFactory = Callable[[ChannelConfig], Provider]
_PROVIDERS: dict[str, ProviderFactory] = {}


def register_provider(name: str, factory: ProviderFactory) -> None:
    _PROVIDERS[name] = factory


def provider_names() -> list[str]:
    return sorted(_PROVIDERS)


def build_provider(channel: ChannelConfig) -> Provider:
    factory = _PROVIDERS.get(channel.provider)
    if factory is None:
        raise ConfigError(
            f"outbox.channels.{channel.name}.provider: unknown provider {channel.provider!r} "
            f"(known: {', '.join(provider_names())})"
        )
    return factory(channel)


def full_jitter_s(attempt: int, base_s: float, cap_s: float) -> float:
    """uniform(0, min(cap, base * 2^(attempt-1))): the default backoff of providers."""
    return random.uniform(0.0, min(cap_s, base_s * 2 ** max(0, min(attempt - 1, 60))))
