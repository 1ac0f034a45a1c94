"""The bad-input corpus: prints how many inputs each surface tried."""

from __future__ import annotations

import pytest

from tests.badinput.tally import TRIED, summary


def pytest_terminal_summary(terminalreporter: pytest.TerminalReporter) -> None:
    if TRIED:
        terminalreporter.write_sep("-", "bad-input corpus")
        terminalreporter.write_line(summary())
