"""worker.queue_rates (docs/rate-limits.md): ``QueueRate`` and its parsers. Light: the
store, the worker and ``Settings`` name the type; the config table imports the parser when
a value is parsed."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

#: A rate's period by its unit: ``10/s``, ``600/m``, ``1000/h``.
RATE_PERIODS_S: dict[str, int] = {"s": 1, "m": 60, "h": 3600}
#: The most jobs one rate may allow per period.
MAX_RATE_COUNT = 1_000_000


@dataclass(frozen=True, slots=True)
class QueueRate:
    """At most ``count`` jobs of a queue start per ``period_s`` (epoch-aligned windows of the
    database clock), fleet-wide."""

    count: int
    period_s: int

    def __str__(self) -> str:
        unit = next(u for u, s in RATE_PERIODS_S.items() if s == self.period_s)
        return f"{self.count}/{unit}"


def parse_rate(raw: Any) -> QueueRate:
    """``10/s``, ``600/m`` or ``1000/h``."""
    count, sep, unit = str(raw).strip().partition("/")
    unit = unit.strip()
    if not sep or unit not in RATE_PERIODS_S or not count.strip().isdigit():
        raise ValueError(f"expected a rate like 10/s, 600/m or 1000/h, got {str(raw)[:40]!r}")
    n = int(count)
    if not 1 <= n <= MAX_RATE_COUNT:
        raise ValueError(f"a rate's count must be in 1..{MAX_RATE_COUNT}, got {n}")
    return QueueRate(n, RATE_PERIODS_S[unit])


def parse_queue_rates(raw: Any) -> dict[str, QueueRate]:
    """``provider=10/s,mail=600/m`` or a YAML mapping (``{provider: 10/s}``): queue -> the
    most jobs of it that start per second, minute or hour across the fleet."""
    from gochatd.config.fields import queue_pairs

    pairs = queue_pairs(raw, "a mapping of queue to rate ({provider: 10/s})",
                        "provider=10/s,mail=600/m")
    out: dict[str, QueueRate] = {}
    for name, rate in pairs:
        try:
            out[name] = parse_rate(rate)
        except ValueError as exc:
            raise ValueError(f"rate of {name!r}: {exc}") from None
    return out
