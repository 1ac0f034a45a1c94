"""Reads the record file the no-op handlers append to, and the statistics taken from it.

Each line is ``"<t_start> <t_enq> <idx> <phase>"`` (see ``adapters/contract.py``).
"""

from __future__ import annotations

import math
from collections import defaultdict
from dataclasses import dataclass


@dataclass(frozen=True)
class Start:
    t_start: float
    t_enq: float
    idx: int

    @property
    def latency_ms(self) -> float:
        return (self.t_start - self.t_enq) * 1000


class RecordTail:
    """Incremental reader: each :meth:`poll` parses only what was appended since the last."""

    def __init__(self, path: str) -> None:
        self.path = path
        self._offset = 0
        self._partial = b""
        self.starts: dict[int, list[Start]] = defaultdict(list)
        self.bad_lines = 0

    def poll(self) -> None:
        try:
            with open(self.path, "rb") as f:
                f.seek(self._offset)
                data = f.read()
        except FileNotFoundError:
            return
        self._offset += len(data)
        lines = (self._partial + data).split(b"\n")
        self._partial = lines.pop()
        for line in lines:
            try:
                t_start, t_enq, idx, phase = line.split()
                self.starts[int(phase)].append(Start(float(t_start), float(t_enq), int(idx)))
            except ValueError:
                self.bad_lines += 1

    def count(self, phase: int) -> int:
        return len(self.starts[phase])

    def duplicates(self, phase: int) -> int:
        got = self.starts[phase]
        return len(got) - len({s.idx for s in got})


def percentile(values: list[float], p: float) -> float | None:
    """Linear interpolation between closest ranks (numpy's default)."""
    if not values:
        return None
    ordered = sorted(values)
    k = (len(ordered) - 1) * p / 100
    lo, hi = math.floor(k), math.ceil(k)
    return ordered[lo] + (ordered[hi] - ordered[lo]) * (k - lo)
