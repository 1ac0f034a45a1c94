"""Which queues this daemon claims from, and in which order this round.

The weights come from ``worker.queues`` (reloadable); fleet-wide pauses are set by the
``pauses`` loop (and the admin API right after a pause). Readers: the intake, the
scheduler and sweep, the capped backlog.

The order is weighted fair queueing by what each queue was given: a round reads the
queues in order of their pass, and each job a round takes from a queue advances that
queue's pass by 1/weight (``charge``). So queues that all have work get jobs in the ratio
of their weights, and none with a weight above zero starves. A queue found empty keeps no
credit: its pass is raised to the passes of the queues that had work. So when a job
arrives in it, that queue is read first in the next round, even while another queue holds
a backlog of thousands (docs/chaos.md, ``burst``). A weighted lottery per round, used
before, let a bulk queue stay ahead of it for several rounds in a row.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from gochatd.config.settings import Settings


class QueueSelection:
    def __init__(self, weights: Mapping[str, int], *, strict: bool = False) -> None:
        self._weights = dict(weights)
        self._strict = strict
        #: Each active queue's pass: what it was given, in jobs / weight (least is 0).
        self._pass: dict[str, float] = {}
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

    def _active(self) -> dict[str, int]:
        return {q: w for q, w in self._weights.items() if w > 0 and q not in self.paused}

    def order(self) -> list[str]:
        """This round's read order: strict by weight, or by pass (the least given first;
        a tie goes to the heavier queue)."""
        weights = self._active()
        if self._strict:
            return sorted(weights, key=lambda q: -weights[q])
        return sorted(weights, key=lambda q: (self._pass.get(q, 0.0), -weights[q], q))

    def charge(self, order: Sequence[str], taken: Mapping[str, int]) -> None:
        """A round read ``order`` and took ``taken`` jobs per queue. Each queue that gave
        jobs advances by jobs / weight. A queue ahead of the last one that gave jobs gave
        none because it had none (the round moved past it): it is raised to the least pass
        among those that gave, so an idle queue banks no credit."""
        weights = self._active()
        if self._strict or not weights:
            return
        given = [q for q in order if taken.get(q, 0) > 0 and q in weights]
        if not given:
            return
        passes = {q: self._pass.get(q, 0.0) for q in weights}  # paused or removed: forgotten
        for queue in given:
            passes[queue] += taken[queue] / weights[queue]
        floor = min(passes[q] for q in given)
        for queue in order[:order.index(given[-1])]:
            if queue in passes and taken.get(queue, 0) <= 0:
                passes[queue] = max(passes[queue], floor)
        least = min(passes.values())
        self._pass = {q: p - least for q, p in passes.items()}
