"""structlog set-up: JSON lines when stdout is not a TTY (journald), console on a TTY."""

from __future__ import annotations

import logging
import sys
from typing import Any

import structlog

_LEVELS = {"debug": logging.DEBUG, "info": logging.INFO, "warning": logging.WARNING,
           "error": logging.ERROR}


#: The bound root logger, built on first use after each configure_logging(): binding per
#: job context onto it skips structlog's lazy-proxy resolution on the hot path.
_root: structlog.typing.FilteringBoundLogger | None = None


def configure_logging(level: str = "info", fmt: str = "auto") -> None:
    global _root
    _root = None
    use_json = fmt == "json" or (fmt == "auto" and not sys.stdout.isatty())
    renderer: Any = (
        structlog.processors.JSONRenderer()
        if use_json
        else structlog.dev.ConsoleRenderer(colors=sys.stdout.isatty())
    )
    structlog.configure(
        processors=[
            structlog.contextvars.merge_contextvars,
            structlog.processors.add_log_level,
            structlog.processors.TimeStamper(fmt="iso", utc=True),
            structlog.processors.format_exc_info if use_json else structlog.dev.set_exc_info,
            renderer,
        ],
        wrapper_class=structlog.make_filtering_bound_logger(_LEVELS.get(level, logging.INFO)),
        logger_factory=structlog.PrintLoggerFactory(file=sys.stdout),
        cache_logger_on_first_use=False,
    )


def get_logger(**bind: Any) -> structlog.typing.FilteringBoundLogger:
    global _root
    if _root is None:
        _root = structlog.get_logger("gochatd").bind()
    return _root.bind(**bind)
