"""Progress bars for ``gochatd migrate run``: one line per scope, phase and table.

On a terminal the line is redrawn in place as batches land; otherwise (a log, CI) only the
finished line is written, so the output stays readable.
"""

from __future__ import annotations

import sys
import time
from typing import TextIO

WIDTH = 24


class Progress:
    def __init__(self, stream: TextIO | None = None) -> None:
        self.stream = stream if stream is not None else sys.stderr
        self.live = self.stream.isatty()
        self._key: tuple[str, str, str] | None = None
        self._t0 = time.perf_counter()
        self._line = ""

    def update(self, scope: str, phase: str, table: str, done: int, total: int | None) -> None:
        key = (scope, phase, table)
        if key != self._key:
            self._end_line()
            self._key, self._t0 = key, time.perf_counter()
        self._line = self._render(scope, phase, table, done, total)
        if self.live:
            self.stream.write("\r" + self._line)
            self.stream.flush()

    def done(self) -> None:
        self._end_line()

    def _end_line(self) -> None:
        if self._key is not None:
            self.stream.write(("\r" if self.live else "") + self._line + "\n")
            self.stream.flush()
        self._key = None

    def _render(self, scope: str, phase: str, table: str, done: int, total: int | None) -> str:
        seconds = max(time.perf_counter() - self._t0, 1e-9)
        rate = f"{done / seconds:,.0f} rows/s"
        if total:
            share = min(done / total, 1.0)
            filled = round(share * WIDTH)
            bar = "[" + "#" * filled + "-" * (WIDTH - filled) + f"] {share:4.0%}"
            count = f"{done}/{total}"
        else:
            bar = "[" + ("#" * WIDTH if done else "-" * WIDTH) + "]     "
            count = str(done)
        return f"{scope[:20]:20} {phase:9} {table:24} {bar} {count:>15} {rate:>16}"
