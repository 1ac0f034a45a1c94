"""Which queues this daemon claims from, and in which order this round.

The weights come from ``worker.queues`` (reloadable); fleet-wide pauses are set by the
``pauses`` loop (and the admin API right after a pause). Readers: the intake, the
scheduler and sweep, the capped backlog.
"""

from __future__ import annotations

import random
from collections.abc import Mapping

from gochatd.config.settings import Settings


class QueueSelection:
    def __init__(self, weights: Mapping[str, int], *, strict: bool = False) -> None:
        self._weights = dict(weights)
        self._strict = strict
        self._rng = random.Random()
        #: Queues paused fleet-wide (``gochatd_queue_pauses``), as last read.
        self.paused: frozenset[str] = frozenset()

    def reconfigure(self, settings: Settings) -> None:
        self._weights = dict(settings.worker_queues)
        self._strict = settings.worker_strict_priority

    @property
    def weights(self) -> dict[str, int]:
        return dict(self._weights)

    @property
    def queues(self) -> list[str]:
        """Every queue with a weight above zero (paused or not): dispatch and sweep."""
        return [q for q, w in self._weights.items() if w > 0]

    @property
    def intake(self) -> list[str]:
        """The queues this worker claims from now: weight above zero and not paused."""
        return [q for q in self.queues if q not in self.paused]

    def order(self) -> list[str]:
        """This round's read order: strict by weight, or a weighted random shuffle so every
        queue with a weight above zero is sometimes first (never starved)."""
        weights = {q: w for q, w in self._weights.items() if w > 0 and q not in self.paused}
        if self._strict:
            return sorted(weights, key=lambda q: -weights[q])
        keyed = [(self._rng.random() ** (1.0 / w), q) for q, w in weights.items()]
        return [q for _, q in sorted(keyed, reverse=True)]
