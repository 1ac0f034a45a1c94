"""Fixtures for the systemd integration: real notify sockets and real daemon processes."""

from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.systemd.notify import NotifyListener


@pytest.fixture
def notify_socket(tmp_path: Path) -> Iterator[NotifyListener]:
    """A bound notify socket at a path in tmp_path."""
    listener = NotifyListener.at_path(tmp_path)
    try:
        yield listener
    finally:
        listener.close()
